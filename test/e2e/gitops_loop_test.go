//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/gitapprove"
)

// The whole approval loop, one piece of each real thing (bare Git origin,
// the planlock binary, the refund server, the real git as reviewer, `planlock
// reconcile` and the generated workflow's publish script as CI) and the
// GitHub fake: planlock approve → merge → reconcile-sign → publish → the
// proxy pulls the plan (--repo) → a held call → its pull request merged →
// reconcile-sign → publish → the call runs once → the pull request says so
// (with the audit sequence number) and is closed.
func TestGitOpsApprovalLoop(t *testing.T) {
	l := newLoopWith(t, true, true)

	// A new version of the plan, approved with planlock approve.
	v2 := strings.Replace(loopPlan, `  step "email" {`, `  step "lookup" {
    tool      = "get_order"
    max_calls = 1
    arg "order_id" { eq = "4711" }
  }

  step "email" {`, 1)
	writeFile(t, filepath.Join(l.work, "plans", "refund.hcl"), v2)
	approve := exec.Command(l.planlock, "approve", "--github-api", l.gh.URL(), "--github-repo", "acme/plans", filepath.Join("plans", "refund.hcl"))
	approve.Dir = l.work
	home := t.TempDir()
	approve.Env = append(os.Environ(), "GITHUB_TOKEN="+ghToken, "GH_TOKEN=", "HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+filepath.Join(home, ".gitconfig"))
	if out, err := approve.CombinedOutput(); err != nil || !strings.Contains(string(out), "https://github.example/acme/plans/pull/1") {
		t.Fatalf("planlock approve: %v\n%s", err, out)
	}
	if labels := l.gh.Labels(1); !slices.Equal(labels, []string{gitapprove.LabelPlan}) {
		t.Errorf("approval PR labels: %q", labels)
	}

	// Merged; CI's reconcile run signs the merged plan (strictly later
	// than v1: signing times have a one-second resolution) and the publish
	// job pushes the bundle.
	l.gh.Merge(1, l.merge(gitapprove.ApproveBranch("refund-4711")))
	time.Sleep(1100 * time.Millisecond)
	if out := l.ciReconcile(); !strings.Contains(out, "plans/refund.hcl: signed plan") || !strings.Contains(out, "1 of 1 file signed now.") {
		t.Fatalf("reconcile after the plan's merge:\n%s", out)
	}

	// The proxy pulls it: the new step's tool appears.
	deadline := time.Now().Add(time.Minute) // a bound on waiting, not a timing assertion
	for {
		res, err := l.agent.ListTools(context.Background(), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(res.Tools, func(tl mcp.Tool) bool { return tl.Name == "get_order" }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the proxy did not load the approved plan from the repository")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if text, isErr := l.call("get_order", map[string]any{"order_id": "4711"}); isErr {
		t.Fatalf("the new step: %s", text)
	}

	// A held call: its pull request, merged and signed, lets it run once.
	args := map[string]any{"to": "customer-4711@example.com", "body": "your refund"}
	text, isErr := l.call("send_email", args)
	l.expect("held", text, isErr, "needs approval", "https://github.example/acme/plans/pull/2")
	id := holdID(t, text)
	if labels := l.gh.Labels(2); !slices.Equal(labels, []string{gitapprove.LabelHold}) {
		t.Errorf("hold PR labels: %q", labels)
	}
	l.gh.Merge(2, l.merge("planlock/hold/refund-4711/"+id))
	if out := l.ciReconcile(); !strings.Contains(out, "holds/refund-4711/"+id+".hcl: signed hold") || !strings.Contains(out, "plans/refund.hcl: approved") {
		t.Fatalf("reconcile after the hold's merge:\n%s", out)
	}
	if text, isErr := l.call("send_email", args); isErr {
		t.Fatalf("approved call: %s", text)
	}
	text, isErr = l.call("send_email", args)
	l.expect("used up", text, isErr, "needs approval")
	if n := len(l.calls("send_email")); n != 1 {
		t.Fatalf("send_email reached the upstream %d times, want 1", n)
	}
	c := l.waitComment(2, "planlock ran the approved call of hold `"+id+"` once: audit record #")
	if !regexp.MustCompile("audit record #[0-9]+").MatchString(c) {
		t.Errorf("the comment names no audit sequence number: %q", c)
	}
	if p := l.gh.Pull(2); p.State != "closed" || !p.Merged {
		t.Errorf("hold PR: state %q merged %v, want closed and merged", p.State, p.Merged)
	}
}
