package approvals

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/proxy/holdreq"
	"github.com/planlock/planlock/proxy/ledger"
)

// benchRepo is a bare origin and a clone of it, made by the real git.
func benchRepo(b *testing.B) *gitapprove.Repo {
	b.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("git is not installed")
	}
	root := b.TempDir()
	origin, work := filepath.Join(root, "origin.git"), filepath.Join(root, "work")
	home := b.TempDir()
	run := func(dir string, args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+filepath.Join(home, ".gitconfig"),
			"GIT_AUTHOR_NAME=B", "GIT_AUTHOR_EMAIL=b@example.com", "GIT_COMMITTER_NAME=B", "GIT_COMMITTER_EMAIL=b@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run(root, "init", "--bare", "-q", "-b", "main", origin)
	run(root, "clone", "-q", origin, work)
	run(work, "checkout", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(work, "README.md"), []byte("plans\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	run(work, "add", "-A")
	run(work, "commit", "-q", "-m", "init")
	run(work, "push", "-q", "origin", "main")
	repo, err := gitapprove.Open(work, gitapprove.Options{Author: &object.Signature{Name: "planlock", Email: "planlock@example.com"}})
	if err != nil {
		b.Fatal(err)
	}
	return repo
}

// BenchmarkRepeatedHeldCall is what the agent's repeated call of a pending
// hold costs: a fetch from a local bare repository and the status look-up
// (Git only, no forge), plus the ledger's hold record.
func BenchmarkRepeatedHeldCall(b *testing.B) {
	repo := benchRepo(b)
	led, err := ledger.Open(b.Context(), ledger.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer led.Close()
	a, err := New(Config{Store: led, PRs: &gitapprove.Holds{Repo: repo, Base: "main"}, OpenWait: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	r := holdreq.Request{PlanName: "bench", Reason: "approval each", Expires: time.Now().Add(time.Hour),
		Call: ledger.Call{PlanDigest: digest, Step: "email", Tool: "send_email", Args: []byte(`{"body":"hi"}`)}}
	if d := a.Decide(b.Context(), r); d.Outcome != holdreq.Held {
		b.Fatalf("first call: %v %s", d.Outcome, d.Message)
	}
	b.ResetTimer()
	for b.Loop() {
		if d := a.Decide(b.Context(), r); d.Outcome != holdreq.Held {
			b.Fatalf("%v %s", d.Outcome, d.Message)
		}
	}
}

// BenchmarkNewHold is a new held call until its answer: the hold record,
// the hold file committed on its own branch and pushed to a local bare
// repository (Git only, no forge).
func BenchmarkNewHold(b *testing.B) {
	repo := benchRepo(b)
	led, err := ledger.Open(b.Context(), ledger.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer led.Close()
	a, err := New(Config{Store: led, PRs: &gitapprove.Holds{Repo: repo, Base: "main"}, OpenWait: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	n := 0
	for b.Loop() {
		n++
		r := holdreq.Request{PlanName: "bench", Reason: "approval each", Expires: time.Now().Add(time.Hour),
			Call: ledger.Call{PlanDigest: digest, Step: "email", Tool: "send_email", Args: []byte(`{"n":` + strconv.Itoa(n) + `}`)}}
		if d := a.Decide(b.Context(), r); d.Outcome != holdreq.Held {
			b.Fatalf("%v %s", d.Outcome, d.Message)
		}
	}
}
