package gitapprove

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/planlock/planlock/internal/testkit/githubtest"
)

// publishBundle plays CI: it commits a bundle beside the file's path on the
// approvals branch with the real git and pushes it.
func publishBundle(t *testing.T, f fixture, path, bundle string) {
	t.Helper()
	rgit(t, f.reviewer, "fetch", "-q", "origin")
	if out := rgit(t, f.reviewer, "ls-remote", "--heads", "origin", DefaultApprovalsBranch); out == "" {
		rgit(t, f.reviewer, "checkout", "-q", "--orphan", "approvals")
		rgit(t, f.reviewer, "rm", "-rfq", "--ignore-unmatch", ".")
	} else {
		rgit(t, f.reviewer, "checkout", "-q", "-B", "approvals", "origin/"+DefaultApprovalsBranch)
	}
	writeFile(t, filepath.Join(f.reviewer, path+BundleSuffix), bundle)
	rgit(t, f.reviewer, "add", path+BundleSuffix)
	rgit(t, f.reviewer, "commit", "-q", "-m", "sign "+path)
	rgit(t, f.reviewer, "push", "-q", "origin", "approvals:"+DefaultApprovalsBranch)
	rgit(t, f.reviewer, "checkout", "-q", "main")
}

// reviewerMerges merges the branch into main with the real git and pushes.
func reviewerMerges(t *testing.T, f fixture, branch string) string {
	t.Helper()
	rgit(t, f.reviewer, "checkout", "-q", "main")
	rgit(t, f.reviewer, "pull", "-q", "--ff-only", "origin", "main")
	rgit(t, f.reviewer, "fetch", "-q", "origin")
	rgit(t, f.reviewer, "merge", "-q", "--no-ff", "-m", "Merge "+branch, "origin/"+branch)
	rgit(t, f.reviewer, "push", "-q", "origin", "main")
	return rgit(t, f.reviewer, "rev-parse", "HEAD")
}

func TestHoldPRFlowWithGitHub(t *testing.T) {
	f := newFixture(t, "main", map[string]string{"plans/refund-4711.hcl": pinPlan})
	gh := githubtest.New(t, "acme", "plans", "tok")
	holds := &Holds{Repo: openRepo(t, f.work), Forge: fakeClient(gh), Base: "main"}
	hold := sampleHold()
	hold.Step = "refund"

	opened, err := holds.Open(ctx(t), hold, &PinChange{PlanPath: "plans/refund-4711.hcl"})
	if err != nil {
		t.Fatal(err)
	}
	if opened.PR == nil || opened.PR.Number != 1 || opened.URL() != "https://github.example/acme/plans/pull/1" {
		t.Fatalf("opened = %+v", opened)
	}
	pr := gh.Pull(1)
	if pr.Head != hold.Branch() || pr.Base != "main" || !strings.Contains(pr.Body, `"amount": 30`) || !strings.Contains(pr.Body, hold.Reason) {
		t.Errorf("PR on GitHub = %+v", pr)
	}
	// The branch holds the exact hold file and the plan with the new pin.
	want, _ := WriteHold(hold)
	rgit(t, f.reviewer, "fetch", "-q", "origin")
	if got := rgit(t, f.reviewer, "show", "origin/"+hold.Branch()+":"+hold.Path()); got != strings.TrimSpace(string(want)) {
		t.Errorf("hold file on branch:\n%s", got)
	}
	if got := rgit(t, f.reviewer, "show", "origin/"+hold.Branch()+":plans/refund-4711.hcl"); !strings.Contains(got, `eq    = "0c1f2e3d4b5a6978"`) {
		t.Errorf("pin not updated in plan:\n%s", got)
	}

	// Opening the same hold again updates the same PR and pushes nothing new.
	before := rgit(t, f.reviewer, "rev-parse", "origin/"+hold.Branch())
	if again, err := holds.Open(ctx(t), hold, &PinChange{PlanPath: "plans/refund-4711.hcl"}); err != nil || again.PR.Number != 1 || gh.Count() != 1 {
		t.Fatalf("second Open = %+v, %v (%d PRs)", again, err, gh.Count())
	}
	rgit(t, f.reviewer, "fetch", "-q", "origin")
	if after := rgit(t, f.reviewer, "rev-parse", "origin/"+hold.Branch()); after != before {
		t.Errorf("second Open moved the branch %s → %s", before, after)
	}

	st, err := holds.Status(ctx(t), hold, 1)
	if err != nil || st.State != HoldPending || st.AwaitingSignature {
		t.Fatalf("open PR: %+v, %v", st, err)
	}

	mergeSHA := reviewerMerges(t, f, hold.Branch())
	gh.Merge(1, mergeSHA)
	st, err = holds.Status(ctx(t), hold, 1)
	if err != nil || st.State != HoldPending || !st.AwaitingSignature || st.PR.MergeCommit != mergeSHA {
		t.Fatalf("merged, unsigned: %+v, %v", st, err)
	}

	publishBundle(t, f, hold.Path(), `{"bundle":"for the hold"}`)
	st, err = holds.Status(ctx(t), hold, 1)
	if err != nil || st.State != HoldMerged {
		t.Fatalf("merged and signed: %+v, %v", st, err)
	}
	if string(st.File) != string(want) || string(st.Bundle) != `{"bundle":"for the hold"}` {
		t.Errorf("file %q bundle %q", st.File, st.Bundle)
	}
	parsed, err := ParseHold(st.File)
	if err != nil || parsed.ID != hold.ID || string(parsed.Args) != string(hold.Args) {
		t.Errorf("merged file does not parse back to the hold: %+v %v", parsed, err)
	}
}

func TestHoldPRClosedIsRejected(t *testing.T) {
	f := newFixture(t, "main", nil)
	gh := githubtest.New(t, "acme", "plans", "tok")
	holds := &Holds{Repo: openRepo(t, f.work), Forge: fakeClient(gh), Base: "main"}
	hold := sampleHold()
	hold.ObservedPin = ""
	opened, err := holds.Open(ctx(t), hold, nil)
	if err != nil {
		t.Fatal(err)
	}
	gh.ClosePull(opened.PR.Number)
	st, err := holds.Status(ctx(t), hold, opened.PR.Number)
	if err != nil || st.State != HoldRejected {
		t.Fatalf("closed PR: %+v, %v", st, err)
	}
}

// Without a forge, Git alone decides: merged = the hold file reached the base
// branch; rejected = the hold branch was deleted without that.
func TestHoldPRFlowGitOnly(t *testing.T) {
	f := newFixture(t, "main", nil)
	holds := &Holds{Repo: openRepo(t, f.work)} // base: the remote's default branch
	approved, rejected := sampleHold(), sampleHold()
	rejected.ID = "h-2"
	for _, h := range []*HoldRequest{approved, rejected} {
		opened, err := holds.Open(ctx(t), h, nil)
		if err != nil {
			t.Fatal(err)
		}
		if opened.PR != nil || !strings.Contains(opened.URL(), "pushed branch "+h.Branch()) {
			t.Fatalf("without a forge: %+v", opened)
		}
	}
	for _, h := range []*HoldRequest{approved, rejected} {
		if st, err := holds.Status(ctx(t), h, 0); err != nil || st.State != HoldPending {
			t.Fatalf("%s before review: %+v, %v", h.ID, st, err)
		}
	}
	reviewerMerges(t, f, approved.Branch())
	rgit(t, f.reviewer, "push", "-q", "origin", "--delete", rejected.Branch())
	publishBundle(t, f, approved.Path(), "B")

	st, err := holds.Status(ctx(t), approved, 0)
	if err != nil || st.State != HoldMerged || string(st.Bundle) != "B" {
		t.Fatalf("merged with git: %+v, %v", st, err)
	}
	st, err = holds.Status(ctx(t), rejected, 0)
	if err != nil || st.State != HoldRejected {
		t.Fatalf("deleted branch: %+v, %v", st, err)
	}
}

func TestHoldUnreachableIsUnavailable(t *testing.T) {
	t.Run("git remote gone", func(t *testing.T) {
		f := newFixture(t, "main", nil)
		rgit(t, f.work, "remote", "set-url", "origin", filepath.Join(t.TempDir(), "gone.git"))
		holds := &Holds{Repo: openRepo(t, f.work), Base: "main"}
		if _, err := holds.Open(ctx(t), sampleHold(), nil); !errors.Is(err, ErrUnavailable) {
			t.Errorf("Open = %v, want ErrUnavailable", err)
		}
		if _, err := holds.Status(ctx(t), sampleHold(), 0); !errors.Is(err, ErrUnavailable) {
			t.Errorf("Status = %v, want ErrUnavailable", err)
		}
	})
	t.Run("GitHub down", func(t *testing.T) {
		f := newFixture(t, "main", nil)
		gh := githubtest.New(t, "acme", "plans", "tok")
		holds := &Holds{Repo: openRepo(t, f.work), Forge: fakeClient(gh), Base: "main"}
		opened, err := holds.Open(ctx(t), sampleHold(), nil)
		if err != nil {
			t.Fatal(err)
		}
		gh.Close()
		if _, err := holds.Status(ctx(t), sampleHold(), opened.PR.Number); !errors.Is(err, ErrUnavailable) {
			t.Errorf("Status = %v, want ErrUnavailable", err)
		}
		h2 := sampleHold()
		h2.ID = "h-3"
		if _, err := holds.Open(ctx(t), h2, nil); !errors.Is(err, ErrUnavailable) {
			t.Errorf("Open = %v, want ErrUnavailable", err)
		}
	})
}

func TestHoldStatusRejectsUnsafeNames(t *testing.T) {
	f := newFixture(t, "main", nil)
	holds := &Holds{Repo: openRepo(t, f.work), Base: "main"}
	h := sampleHold()
	h.PlanName = "../x"
	if _, err := holds.Status(ctx(t), h, 0); err == nil {
		t.Fatal("Status accepted a traversing plan name")
	}
	if _, err := holds.Open(ctx(t), h, nil); err == nil {
		t.Fatal("Open accepted a traversing plan name")
	}
}

// The proxy keeps its own bare clone (OpenCache) and may check several
// holds at once.
func TestHoldStatusFromCacheCloneConcurrently(t *testing.T) {
	f := newFixture(t, "main", nil)
	user := &Holds{Repo: openRepo(t, f.work), Base: "main"}
	var holds []*HoldRequest
	for i := 0; i < 4; i++ {
		h := sampleHold()
		h.ID = fmt.Sprintf("h-%d", i)
		if _, err := user.Open(ctx(t), h, nil); err != nil {
			t.Fatal(err)
		}
		holds = append(holds, h)
	}
	reviewerMerges(t, f, holds[0].Branch())
	publishBundle(t, f, holds[0].Path(), "B0")

	dir := filepath.Join(t.TempDir(), "cache.git")
	cache, err := OpenCache(ctx(t), f.origin, dir, Options{Author: testAuthor})
	if err != nil {
		t.Fatal(err)
	}
	proxy := &Holds{Repo: cache} // base from the remote's HEAD
	var wg sync.WaitGroup
	states := make([]HoldState, 8)
	errs := make([]error, 8)
	for i := range states {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			st, err := proxy.Status(ctx(t), holds[i%4], 0)
			states[i], errs[i] = st.State, err
		}(i)
	}
	wg.Wait()
	for i := range states {
		want := HoldPending
		if i%4 == 0 {
			want = HoldMerged
		}
		if errs[i] != nil || states[i] != want {
			t.Errorf("Status(%s) = %s, %v; want %s", holds[i%4].ID, states[i], errs[i], want)
		}
	}

	// Reopening the cache works; a cache of another remote is refused.
	if _, err := OpenCache(ctx(t), f.origin, dir, Options{}); err != nil {
		t.Errorf("reopen: %v", err)
	}
	if _, err := OpenCache(ctx(t), "/elsewhere.git", dir, Options{}); err == nil || !strings.Contains(err.Error(), "is a clone of") {
		t.Errorf("cache of another remote: %v", err)
	}
	gone := filepath.Join(t.TempDir(), "c2")
	if _, err := OpenCache(ctx(t), filepath.Join(t.TempDir(), "missing.git"), gone, Options{}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("clone of a missing remote: %v, want ErrUnavailable", err)
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("failed clone left %s behind", gone)
	}
}
