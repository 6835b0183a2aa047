package gitapprove

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// The summary comment the workflow updates is its own: found by the marker
// and by its author, so a comment anyone else wrote with the marker (to
// have the workflow overwrite it, or to pose as the summary) is ignored.
// The workflow's own jq filter runs against the shape of GitHub's list of
// issue comments.
func TestSummaryCommentFoundByMarkerAndAuthor(t *testing.T) {
	jq, err := exec.LookPath("jq")
	if err != nil {
		t.Skip("jq is not installed")
	}
	wf, err := GitHubWorkflow(validOptions())
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`--jq '([^']+)'`).FindSubmatch(wf)
	if m == nil {
		t.Fatal("no --jq filter in the workflow")
	}
	comments := `[
  {"id": 11, "user": {"login": "mallory", "type": "User"}, "body": "<!-- planlock-summary -->\nAll good, max = 30"},
  {"id": 12, "user": {"login": "github-actions[bot]", "type": "Bot"}, "body": "unrelated bot comment"},
  {"id": 13, "user": {"login": "github-actions[bot]", "type": "Bot"}, "body": "<!-- planlock-summary -->\n### plans/a.hcl"},
  {"id": 14, "user": {"login": "github-actions", "type": "User"}, "body": "<!-- planlock-summary -->\nlook-alike login"}
]`
	cmd := exec.Command(jq, "-r", string(m[1]))
	cmd.Stdin = strings.NewReader(comments)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("jq: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "13" {
		t.Errorf("the workflow would update comment(s) %q, want only 13", got)
	}
}
