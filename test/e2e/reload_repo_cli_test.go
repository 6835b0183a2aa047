//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/planlock/planlock/sign"
)

// plansRepo is a bare Git repository (the remote, reached as file://) and a
// work clone that publishes to it the way a merge and the signing job do:
// the plan on main, its bundle on planlock/approvals at the same path.
type plansRepo struct {
	t          *testing.T
	bare, work string
}

func newPlansRepo(t *testing.T, dir string) *plansRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	r := &plansRepo{t: t, bare: filepath.Join(dir, "origin.git"), work: filepath.Join(dir, "work")}
	r.git(dir, "init", "-q", "--bare", "-b", "main", r.bare)
	r.git(dir, "init", "-q", "-b", "main", r.work)
	r.git(r.work, "remote", "add", "origin", r.bare)
	return r
}

func (r *plansRepo) git(dir string, args ...string) {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=ci", "-c", "user.email=ci@example.com", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+r.t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// commit puts files (repository path → content) on branch and pushes it.
func (r *plansRepo) commit(branch string, files map[string][]byte) {
	r.t.Helper()
	if exec.Command("git", "-C", r.work, "rev-parse", "--verify", "-q", "refs/heads/"+branch).Run() == nil {
		r.git(r.work, "checkout", "-q", branch)
	} else {
		r.git(r.work, "checkout", "-q", "-b", branch)
	}
	for p, b := range files {
		full := filepath.Join(r.work, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			r.t.Fatal(err)
		}
		r.git(r.work, "add", p)
	}
	r.git(r.work, "commit", "-q", "--allow-empty", "-m", "update "+branch)
	r.git(r.work, "push", "-q", "origin", branch)
}

// publish merges a plan and publishes its bundle (from signPlan's files).
func (r *plansRepo) publish(planFile string) {
	r.t.Helper()
	plan, err := os.ReadFile(planFile)
	if err != nil {
		r.t.Fatal(err)
	}
	bundle, err := os.ReadFile(sign.BundlePath(planFile))
	if err != nil {
		r.t.Fatal(err)
	}
	r.commit("main", map[string][]byte{"plans/live.hcl": plan})
	r.commit("planlock/approvals", map[string][]byte{"plans/live.hcl.sigstore.json": bundle})
}

// The real binary takes its plan from a Git repository: the first signed
// plan serves, a newly signed one pushed is reloaded, a tampered one pushed
// is refused while the last verified plan keeps serving, and so does an
// unreachable repository.
func TestProxyPullsItsPlanFromGit(t *testing.T) {
	dir := t.TempDir()
	privPEM, pubPEM, err := sign.GenerateKeyPair("ed25519")
	if err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(dir, "release.pub")
	if err := os.WriteFile(pub, pubPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	repo := newPlansRepo(t, dir)
	t1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	signed := t.TempDir()
	repo.publish(signPlan(t, signed, "live.hcl", livePlanV1, t1, privPEM))

	callsLog, hashFile := filepath.Join(dir, "calls.jsonl"), filepath.Join(dir, "hash")
	if err := os.WriteFile(hashFile, []byte(goodHash+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lp := startLiveProxy(t, "--repo", "file://"+repo.bare, "--plan", "plans/live.hcl", "--key", pub, "--state", filepath.Join(dir, "state"),
		"--reload-interval", "20ms", "--repo-interval", "20ms", "--no-hold-prs",
		"--", refundBin, "--calls-log", callsLog, "--hash-file", hashFile)
	lp.waitLog("planlock: fetched plans/live.hcl from main@")
	lp.waitLog(" verified: signed by key sha256:")
	if got := lp.tools(); got != "get_order" {
		t.Fatalf("v1 tools: %s", got)
	}
	if text, isErr := lp.call("get_order", `{"order_id":"4711"}`); isErr {
		t.Fatalf("v1 lookup: %s", text)
	}

	// A newly signed v2 merged and published: reloaded.
	repo.publish(signPlan(t, signed, "live.hcl", livePlanV2, t1.Add(time.Hour), privPEM))
	lp.waitLog(`: now serving plan "live"`)
	if got := lp.tools(); got != "close_ticket,get_order" {
		t.Fatalf("v2 tools: %s", got)
	}

	// A tampered plan pushed to main (v2's bundle stays): not taken, v2 serves.
	tampered := strings.Replace(livePlanV2, "max_calls = 3", "max_calls = 9", 1)
	repo.commit("main", map[string][]byte{"plans/live.hcl": []byte(tampered)})
	lp.waitLog("planlock: plans repository: plans/live.hcl at main@")
	// ... and with a bundle for its bytes signed by a key the policy does
	// not trust: copied, verified, refused; v2 still serves.
	otherPriv, _, err := sign.GenerateKeyPair("ed25519")
	if err != nil {
		t.Fatal(err)
	}
	repo.publish(signPlan(t, signed, "live.hcl", tampered, t1.Add(2*time.Hour), otherPriv))
	line := lp.waitLog("was NOT loaded")
	if !strings.Contains(line, `still serving plan "live"`) {
		t.Fatalf("log: %q", line)
	}
	for i, want := range []string{`"order_id":"4711"`, `"order_id":"4711"`, `"order_id":"4711"`, `step "lookup": max_calls 3 used up`} {
		if text, _ := lp.call("get_order", `{"order_id":"4711"}`); !strings.Contains(text, want) {
			t.Fatalf("after the tampered plan, lookup %d: %s (want %q)", i+1, text, want)
		}
	}

	// The repository goes away: logged once, v2 keeps serving.
	if err := os.Rename(repo.bare, repo.bare+".gone"); err != nil {
		t.Fatal(err)
	}
	lp.waitLog("planlock: plans repository: look up the plans repository:")
	if text, isErr := lp.call("close_ticket", `{"ticket_id":"T-4711","comment":"done"}`); isErr {
		t.Fatalf("v2 still serves close_ticket: %s", text)
	}
}
