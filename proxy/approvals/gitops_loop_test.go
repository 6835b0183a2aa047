package approvals_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/gitapprove"
)

// The whole approval loop, one piece of each real thing (bare Git origin,
// the planlock binary, the refund server, the real git as reviewer, `planlock
// sign` as CI) and the GitHub fake: planlock approve → merge → sign →
// publish → the proxy pulls the plan (--repo) → a held call → its pull
// request merged → sign → the call runs once → the pull request says so.
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

	// Merged; CI signs the merged plan (strictly later than v1: signing
	// times have a one-second resolution) and publishes the bundle.
	l.gh.Merge(1, l.merge(gitapprove.ApproveBranch("refund-4711")))
	time.Sleep(1100 * time.Millisecond)
	bundle := filepath.Join(t.TempDir(), "plan.sigstore.json")
	sign := exec.Command(l.planlock, "sign", "--kind", "plan", "--key", l.ciKey, "--pr", "1", "--path", "plans/refund.hcl", "--out", bundle, filepath.Join("plans", "refund.hcl"))
	sign.Dir = l.reviewer
	sign.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	if out, err := sign.CombinedOutput(); err != nil {
		t.Fatalf("planlock sign: %v\n%s", err, out)
	}
	data, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	l.publish("plans/refund.hcl", data)

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
	l.ciSign("holds/refund-4711/"+id+".hcl", 2, l.ciKey)
	if text, isErr := l.call("send_email", args); isErr {
		t.Fatalf("approved call: %s", text)
	}
	text, isErr = l.call("send_email", args)
	l.expect("used up", text, isErr, "needs approval")
	if n := len(l.calls("send_email")); n != 1 {
		t.Fatalf("send_email reached the upstream %d times, want 1", n)
	}
	l.waitComment(2, "planlock ran the approved call of hold `"+id+"` once: audit record #")
}
