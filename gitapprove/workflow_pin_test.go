package gitapprove

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pinnedUses is a step's "uses:" pinned by full commit SHA with its tag beside it.
var pinnedUses = regexp.MustCompile(`^\s*(- )?uses: [a-z0-9-]+/[a-z0-9._-]+@[0-9a-f]{40} # v[0-9]+(\.[0-9]+)*$`)

// jobBlock is the text of one job of a workflow, found by its key.
func jobBlock(t *testing.T, wf, job string) string {
	t.Helper()
	start := strings.Index(wf, "\n  "+job+":\n")
	if start < 0 {
		t.Fatalf("no job %q", job)
	}
	rest := wf[start+1:]
	if end := regexp.MustCompile(`\n  [a-z][a-z-]*:\n`).FindStringIndex(rest[1:]); end != nil {
		rest = rest[:end[0]+1]
	}
	return rest
}

func checkPinned(t *testing.T, name, wf string) {
	t.Helper()
	n := 0
	for i, line := range strings.Split(wf, "\n") {
		if !strings.Contains(line, "uses:") {
			continue
		}
		n++
		if !pinnedUses.MatchString(line) {
			t.Errorf("%s:%d: %q is not pinned by full commit SHA with its tag", name, i+1, strings.TrimSpace(line))
		}
	}
	if n == 0 {
		t.Errorf("%s: no uses: lines at all", name)
	}
}

// Every action in the generated and the committed workflows is pinned by
// commit SHA; the sign job holds no write token and keeps no credentials;
// the publish job holds no OIDC token and runs nothing but the pinned
// download-artifact action and git; nothing cancels pending runs.
func TestWorkflowsPinnedAndLeastPrivilege(t *testing.T) {
	files := map[string]string{}
	for name, o := range map[string]WorkflowOptions{"generated": validOptions(), "source": repoWorkflowOptions} {
		b, err := GitHubWorkflow(o)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = string(b)
	}
	committed, _ := filepath.Glob(filepath.Join("..", ".github", "workflows", "*.yml"))
	if len(committed) == 0 {
		t.Fatal("no committed workflows")
	}
	for _, f := range committed {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checkPinned(t, f, string(b))
	}
	for name, wf := range files {
		checkPinned(t, name, wf)
		if strings.Contains(wf, "cancel-in-progress: true") || strings.Contains(wf, "concurrency:") {
			t.Errorf("%s: a concurrency group would let GitHub cancel pending signing runs", name)
		}
		if !strings.Contains(wf, "  schedule:\n    - cron: ") {
			t.Errorf("%s: no scheduled safety-net run", name)
		}
		sign := jobBlock(t, wf, "sign")
		for _, bad := range []string{": write # push", "contents: write", "pull-requests: write", "secrets.", "persist-credentials: true"} {
			if strings.Contains(sign, bad) {
				t.Errorf("%s: sign job contains %q", name, bad)
			}
		}
		for _, want := range []string{"contents: read", "id-token: write", "persist-credentials: false", "planlock reconcile", actionUploadArtifact.Uses()} {
			if !strings.Contains(sign, want) {
				t.Errorf("%s: sign job lacks %q", name, want)
			}
		}
		// Every permission the sign job has is read, except the OIDC token.
		for _, line := range strings.Split(sign, "\n") {
			l := strings.TrimSpace(line)
			if strings.HasSuffix(strings.SplitN(l, " #", 2)[0], ": write") && !strings.HasPrefix(l, "id-token:") {
				t.Errorf("%s: sign job has write permission %q", name, l)
			}
		}
		publish := jobBlock(t, wf, "publish")
		if strings.Contains(publish, "id-token") {
			t.Errorf("%s: publish job can get an OIDC token", name)
		}
		if !strings.Contains(publish, "contents: write") {
			t.Errorf("%s: publish job cannot push", name)
		}
		for _, line := range strings.Split(publish, "\n") {
			if strings.Contains(line, "uses:") && !strings.Contains(line, actionDownloadArtifact.Uses()) {
				t.Errorf("%s: publish job runs third-party code: %s", name, strings.TrimSpace(line))
			}
		}
		if strings.Contains(publish, "planlock ") || strings.Contains(publish, "go ") {
			t.Errorf("%s: publish job runs more than git", name)
		}
	}
}
