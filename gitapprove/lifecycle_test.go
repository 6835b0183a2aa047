package gitapprove

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planlock/planlock/internal/testkit/githubtest"
)

// Approval and hold pull requests are labelled; a hold's pull request is
// told when its call ran, and a retired hold's pull request is commented,
// closed and its branch deleted, once.
func TestHoldPullRequestLifecycle(t *testing.T) {
	v1, err := os.ReadFile(filepath.Join("..", "examples", "refund", "refund.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, "main", nil)
	gh := githubtest.New(t, "acme", "plans", "tok")
	repo := openRepo(t, f.work)
	if _, err := Approve(ctx(t), approveReq(t, repo, fakeClient(gh), string(v1))); err != nil {
		t.Fatal(err)
	}
	if got := gh.Labels(1); len(got) != 1 || got[0] != LabelPlan {
		t.Errorf("approval PR labels = %q", got)
	}

	holds := &Holds{Repo: repo, Forge: fakeClient(gh), Base: "main"}
	ran, expired := sampleHold(), sampleHold()
	expired.ID = "h-20261130-0002"
	for _, h := range []*HoldRequest{ran, expired} {
		if _, err := holds.Open(ctx(t), h, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := gh.Labels(2); len(got) != 1 || got[0] != LabelHold {
		t.Errorf("hold PR labels = %q", got)
	}

	if err := holds.Ran(ctx(t), ran, 2, 4711, "ok"); err != nil {
		t.Fatal(err)
	}
	if c := gh.Comments(2); len(c) != 1 || !strings.Contains(c[0], "audit record #4711, result `ok`") || !strings.Contains(c[0], ran.ID) {
		t.Errorf("comments on #2 = %q", c)
	}

	for i := range 2 { // the second time finds it closed and the branch gone
		if err := holds.Retire(ctx(t), expired, 3, "expired at 2026-12-01T12:00:00Z"); err != nil {
			t.Fatalf("Retire %d: %v", i, err)
		}
	}
	if c := gh.Comments(3); len(c) != 1 || !strings.Contains(c[0], "planlock closed this pull request: hold `h-20261130-0002` expired at 2026-12-01T12:00:00Z") {
		t.Errorf("comments on #3 = %q", c)
	}
	if p := gh.Pull(3); p.State != "closed" || p.Merged {
		t.Errorf("PR #3 = %+v, want closed", p)
	}
	if out := rgit(t, f.reviewer, "ls-remote", "--heads", "origin", expired.Branch()); out != "" {
		t.Errorf("branch %s still on the remote: %s", expired.Branch(), out)
	}
	if out := rgit(t, f.reviewer, "ls-remote", "--heads", "origin", ran.Branch()); out == "" {
		t.Errorf("the other hold's branch was deleted")
	}

	// Labelling refused (read-only for issues here): the PR stands, with a warning.
	gh.Deny(githubtest.DenyWrite)
	p, err := Propose(ctx(t), repo, labelOnlyFails{fakeClient(gh)}, Proposal{Branch: "planlock/approve/x", Base: "main", Files: map[string][]byte{"x.hcl": []byte("x")}, Message: "m", Title: "t", Labels: []string{LabelPlan}})
	if err != nil || p.PR == nil || !strings.Contains(p.Warning, "label pull request") {
		t.Errorf("Propose = %+v, %v; want the PR and a labelling warning", p, err)
	}
}

// labelOnlyFails opens pull requests with a working client while the fake
// refuses writes, so that only labelling meets the refusal.
type labelOnlyFails struct{ *GitHub }

func (l labelOnlyFails) CreateOrUpdatePR(ctx2 context.Context, head, base, title, body string) (PR, error) {
	return PR{Number: 1, State: PROpen}, nil
}

// A reopened hold pull request is carried over to a new hold: the branch
// holds only the new hold's file, the body names it, a comment says why.
func TestHoldReopenCarriesThePullRequestOver(t *testing.T) {
	f := newFixture(t, "main", nil)
	gh := githubtest.New(t, "acme", "plans", "tok")
	holds := &Holds{Repo: openRepo(t, f.work), Forge: fakeClient(gh), Base: "main"}
	old := sampleHold()
	if _, err := holds.Open(ctx(t), old, nil); err != nil {
		t.Fatal(err)
	}
	gh.ClosePull(1)
	gh.ReopenPull(1)
	renewed := sampleHold()
	renewed.ID = "h-20261130-0009"
	pr, err := holds.Reopen(ctx(t), old, renewed, 1, nil)
	if err != nil || pr.PR == nil || pr.PR.Number != 1 || gh.Count() != 1 {
		t.Fatalf("Reopen = %+v, %v (%d PRs); want PR #1 updated", pr, err, gh.Count())
	}
	rgit(t, f.reviewer, "fetch", "-q", "origin")
	files := rgit(t, f.reviewer, "ls-tree", "-r", "--name-only", "origin/"+old.Branch())
	if !strings.Contains(files, renewed.Path()) || strings.Contains(files, old.Path()) {
		t.Errorf("files on the branch:\n%s", files)
	}
	if c := gh.Comments(1); len(c) != 1 || !strings.Contains(c[0], "reopened after planlock had recorded hold `"+old.ID+"` as refused") || !strings.Contains(c[0], renewed.ID) {
		t.Errorf("comments = %q", c)
	}
	st, err := holds.Status(ctx(t), renewed, 1)
	if err != nil || st.State != HoldPending {
		t.Errorf("Status of the new hold = %+v, %v", st, err)
	}
}
