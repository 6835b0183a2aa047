package gitapprove

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planlock/planlock/internal/testkit/githubtest"
)

// squashMerge plays GitHub's "Squash and merge": the branch's content lands
// on main as one new commit (not the branch's commits).
func squashMerge(t *testing.T, f fixture, branch string) string {
	t.Helper()
	rgit(t, f.reviewer, "checkout", "-q", "main")
	rgit(t, f.reviewer, "pull", "-q", "--ff-only", "origin", "main")
	rgit(t, f.reviewer, "fetch", "-q", "origin")
	rgit(t, f.reviewer, "merge", "-q", "--squash", "origin/"+branch)
	rgit(t, f.reviewer, "commit", "-q", "-m", "Approve (squashed)")
	rgit(t, f.reviewer, "push", "-q", "origin", "main")
	return rgit(t, f.reviewer, "rev-parse", "HEAD")
}

// After a squash merge the next approval starts from main again: one new
// commit on top of main, a new pull request, nothing of the old branch.
func TestApproveAfterSquashMergeStartsAgain(t *testing.T) {
	v1, err := os.ReadFile(filepath.Join("..", "examples", "refund", "refund.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	v2 := strings.Replace(string(v1), "max_calls = 3", "max_calls = 2", 1)
	for _, tc := range []struct {
		name  string
		forge bool
	}{{"with GitHub", true}, {"Git alone", false}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "main", nil)
			gh := githubtest.New(t, "acme", "plans", "tok")
			var forge Forge
			if tc.forge {
				forge = fakeClient(gh)
			}
			repo := openRepo(t, f.work)
			if _, err := Approve(ctx(t), approveReq(t, repo, forge, string(v1))); err != nil {
				t.Fatal(err)
			}
			main := squashMerge(t, f, ApproveBranch("refund-4711"))
			if tc.forge {
				gh.Merge(1, main)
			}
			res, err := Approve(ctx(t), approveReq(t, repo, forge, v2))
			if err != nil {
				t.Fatal(err)
			}
			if res.Restarted == "" || !res.Changed {
				t.Errorf("result %+v: want the branch started again", res)
			}
			rgit(t, f.reviewer, "fetch", "-q", "origin")
			if parent := rgit(t, f.reviewer, "rev-parse", "origin/"+ApproveBranch("refund-4711")+"^"); parent != main {
				t.Errorf("the new commit's parent is %s, want main %s", parent, main)
			}
			if tc.forge && (res.PR == nil || res.PR.Number != 2 || gh.Count() != 2) {
				t.Errorf("PR = %+v (%d PRs), want a new #2", res.PR, gh.Count())
			}
			// The diff against main is exactly the edit: no conflict, no old commit.
			diff := rgit(t, f.reviewer, "diff", "--stat", main, "origin/"+ApproveBranch("refund-4711"))
			if !strings.Contains(diff, "plans/refund.hcl | 2 +-") {
				t.Errorf("diff against main:\n%s", diff)
			}
		})
	}
}

// A closed (rejected) approval pull request also starts the branch again.
func TestApproveAfterClosedPRStartsAgain(t *testing.T) {
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
	gh.ClosePull(1)
	res, err := Approve(ctx(t), approveReq(t, repo, fakeClient(gh), strings.Replace(string(v1), "max_calls = 3", "max_calls = 1", 1)))
	if err != nil || res.Restarted == "" || res.PR.Number != 2 {
		t.Fatalf("%+v, %v; want a fresh branch and PR #2", res, err)
	}
	rgit(t, f.reviewer, "fetch", "-q", "origin")
	if n := rgit(t, f.reviewer, "rev-list", "--count", "origin/main..origin/"+ApproveBranch("refund-4711")); n != "1" {
		t.Errorf("%s commits on the branch beyond main, want 1", n)
	}
}

// Someone else's commit at the tip of an open approval branch: refused,
// naming them and the flag; with the flag it is stacked on.
func TestApproveRefusesToStackOnAnotherAuthor(t *testing.T) {
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
	// A colleague approves their own edit of the same plan (the real git,
	// as Reviewer <reviewer@example.com>).
	branch := ApproveBranch("refund-4711")
	rgit(t, f.reviewer, "fetch", "-q", "origin")
	rgit(t, f.reviewer, "checkout", "-q", "-B", "theirs", "origin/"+branch)
	writeFile(t, filepath.Join(f.reviewer, "plans", "refund.hcl"), strings.Replace(string(v1), "max_calls = 3", "max_calls = 5", 1))
	rgit(t, f.reviewer, "commit", "-q", "-am", "their edit")
	rgit(t, f.reviewer, "push", "-q", "origin", "theirs:"+branch)
	theirs := rgit(t, f.reviewer, "rev-parse", "HEAD")

	mine := strings.Replace(string(v1), "max_calls = 3", "max_calls = 1", 1)
	_, err = Approve(ctx(t), approveReq(t, repo, fakeClient(gh), mine))
	var oa *OtherAuthorError
	if !errors.As(err, &oa) || !strings.Contains(err.Error(), "by Reviewer <reviewer@example.com>") || !strings.Contains(err.Error(), "--allow-other-author") {
		t.Fatalf("err = %v, want the other author named and the flag", err)
	}
	rgit(t, f.reviewer, "fetch", "-q", "origin")
	if tip := rgit(t, f.reviewer, "rev-parse", "origin/"+branch); tip != theirs {
		t.Fatalf("the refused approve moved the branch")
	}
	req := approveReq(t, repo, fakeClient(gh), mine)
	req.AllowOtherAuthor = true
	if _, err := Approve(ctx(t), req); err != nil {
		t.Fatal(err)
	}
	rgit(t, f.reviewer, "fetch", "-q", "origin")
	if parent := rgit(t, f.reviewer, "rev-parse", "origin/"+branch+"^"); parent != theirs {
		t.Errorf("with --allow-other-author the commit goes on top of theirs; parent %s", parent)
	}
}
