package gitapprove

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

func TestOpenFindsRepositoryFromNestedPath(t *testing.T) {
	f := newFixture(t, "main", map[string]string{"plans/team/refund.hcl": "plan\n"})
	for _, p := range []string{
		filepath.Join(f.work, "plans", "team", "refund.hcl"),
		filepath.Join(f.work, "plans", "team"),
		f.work,
	} {
		r := openRepo(t, p)
		root, _ := filepath.EvalSymlinks(f.work)
		if r.Root() != root {
			t.Errorf("Open(%s).Root() = %s, want %s", p, r.Root(), root)
		}
	}
	r := openRepo(t, f.work)
	rel, err := r.RelPath(filepath.Join(f.work, "plans", "team", "refund.hcl"))
	if err != nil || rel != "plans/team/refund.hcl" {
		t.Errorf("RelPath = %q, %v; want plans/team/refund.hcl", rel, err)
	}
	if _, err := r.RelPath(t.TempDir()); err == nil {
		t.Error("RelPath accepted a path outside the repository")
	}
	if _, err := Open(t.TempDir(), Options{}); err == nil {
		t.Error("Open succeeded outside any repository")
	}
}

func TestOpenInsideGitWorktree(t *testing.T) {
	f := newFixture(t, "main", nil)
	wt := filepath.Join(t.TempDir(), "wt")
	rgit(t, f.work, "worktree", "add", "-q", "-b", "side", wt)
	r := openRepo(t, wt)
	if err := r.Fetch(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := r.ReadFile("main", "README.md"); !ok || err != nil {
		t.Fatalf("reading origin/main from a linked worktree: ok=%v err=%v", ok, err)
	}
}

// A branch planlock commits and pushes with go-git is a normal branch to the
// real git: the reviewer merges it with git merge, and planlock sees the merge.
func TestCommitPushThenReviewerMergesWithGit(t *testing.T) {
	f := newFixture(t, "main", nil)
	r := openRepo(t, f.work)
	if err := r.Fetch(ctx(t)); err != nil {
		t.Fatal(err)
	}
	content := "plan \"refund\" {}\n"
	res, err := r.CommitFiles(CommitRequest{Branch: "planlock/approve/refund", Base: "main", Files: map[string][]byte{"plans/refund.hcl": []byte(content)}, Message: "Approve plan refund"})
	if err != nil || !res.Changed {
		t.Fatalf("CommitFiles: %+v, %v", res, err)
	}
	if err := r.Push(ctx(t), "planlock/approve/refund", res.Commit); err != nil {
		t.Fatal(err)
	}
	// The user's checkout is untouched: no local branch, no file.
	rgitFails(t, f.work, "rev-parse", "--verify", "-q", "refs/heads/planlock/approve/refund")
	if _, err := os.Stat(filepath.Join(f.work, "plans", "refund.hcl")); !os.IsNotExist(err) {
		t.Errorf("CommitFiles wrote into the work tree: %v", err)
	}
	rgit(t, f.reviewer, "fetch", "-q", "origin")
	if got := rgit(t, f.reviewer, "show", "origin/planlock/approve/refund:plans/refund.hcl"); got != strings.TrimSpace(content) {
		t.Errorf("git show = %q", got)
	}
	if got := rgit(t, f.reviewer, "log", "-1", "--format=%an <%ae>|%s", "origin/planlock/approve/refund"); got != "planlock test <planlock@example.com>|Approve plan refund" {
		t.Errorf("commit = %q", got)
	}
	rgit(t, f.reviewer, "fsck", "--strict")
	rgit(t, f.reviewer, "merge", "-q", "--no-ff", "-m", "Merge approval", "origin/planlock/approve/refund")
	rgit(t, f.reviewer, "push", "-q", "origin", "main")
	mergeSHA := rgit(t, f.reviewer, "rev-parse", "HEAD")

	if err := r.Fetch(ctx(t)); err != nil {
		t.Fatal(err)
	}
	got, ok, err := r.ReadFile("main", "plans/refund.hcl")
	if err != nil || !ok || string(got) != content {
		t.Fatalf("ReadFile(main) = %q, %v, %v", got, ok, err)
	}
	tip, _, _ := r.RemoteBranchHash("main")
	if tip.String() != mergeSHA {
		t.Errorf("origin/main = %s, want the reviewer's merge %s", tip, mergeSHA)
	}
	if anc, err := r.IsAncestor(res.Commit, tip); err != nil || !anc {
		t.Errorf("IsAncestor(planlock commit, merge) = %v, %v", anc, err)
	}
}

func TestCommitFilesIsIdempotentAndKeepsReviewerCommits(t *testing.T) {
	f := newFixture(t, "main", map[string]string{"plans/refund.hcl": "old\n", "README.md": "x\n"})
	r := openRepo(t, f.work)
	req := CommitRequest{Branch: "planlock/approve/refund", Base: "main", Files: map[string][]byte{"plans/refund.hcl": []byte("new\n")}, Message: "m"}
	if err := r.Fetch(ctx(t)); err != nil {
		t.Fatal(err)
	}
	first, err := r.CommitFiles(req)
	if err != nil || !first.Changed {
		t.Fatalf("first: %+v %v", first, err)
	}
	if err := r.Push(ctx(t), req.Branch, first.Commit); err != nil {
		t.Fatal(err)
	}
	if err := r.Fetch(ctx(t)); err != nil {
		t.Fatal(err)
	}
	again, err := r.CommitFiles(req)
	if err != nil || again.Changed || again.Commit != first.Commit {
		t.Fatalf("again: %+v %v; want unchanged %s", again, err, first.Commit)
	}
	if err := r.Push(ctx(t), req.Branch, again.Commit); err != nil {
		t.Fatalf("pushing an unchanged branch: %v", err)
	}

	// A reviewer adds a commit to the branch; planlock's update goes on top.
	rgit(t, f.reviewer, "fetch", "-q", "origin")
	rgit(t, f.reviewer, "checkout", "-q", "-b", "rv", "origin/planlock/approve/refund")
	writeFile(t, filepath.Join(f.reviewer, "NOTES.md"), "reviewed\n")
	rgit(t, f.reviewer, "add", "NOTES.md")
	rgit(t, f.reviewer, "commit", "-q", "-m", "review notes")
	rgit(t, f.reviewer, "push", "-q", "origin", "rv:planlock/approve/refund")

	if err := r.Fetch(ctx(t)); err != nil {
		t.Fatal(err)
	}
	req.Files["plans/refund.hcl"] = []byte("newer\n")
	upd, err := r.CommitFiles(req)
	if err != nil || !upd.Changed {
		t.Fatalf("update: %+v %v", upd, err)
	}
	if err := r.Push(ctx(t), req.Branch, upd.Commit); err != nil {
		t.Fatal(err)
	}
	rgit(t, f.reviewer, "fetch", "-q", "origin")
	if got := rgit(t, f.reviewer, "show", "origin/planlock/approve/refund:NOTES.md"); got != "reviewed" {
		t.Errorf("reviewer's file lost: %q", got)
	}
	if got := rgit(t, f.reviewer, "show", "origin/planlock/approve/refund:plans/refund.hcl"); got != "newer" {
		t.Errorf("plan = %q", got)
	}
	if got := rgit(t, f.reviewer, "show", "origin/planlock/approve/refund:README.md"); got != "x" {
		t.Errorf("untouched file changed: %q", got)
	}
}

func TestPushRefusesToOverwriteAMovedBranch(t *testing.T) {
	f := newFixture(t, "main", nil)
	r := openRepo(t, f.work)
	branch := "planlock/approve/p"
	if err := r.Fetch(ctx(t)); err != nil {
		t.Fatal(err)
	}
	res, err := r.CommitFiles(CommitRequest{Branch: branch, Base: "main", Files: map[string][]byte{"a.hcl": []byte("1")}, Message: "m"})
	if err != nil {
		t.Fatal(err)
	}
	// Meanwhile someone else creates the branch with other content.
	rgit(t, f.reviewer, "checkout", "-q", "-b", "other")
	writeFile(t, filepath.Join(f.reviewer, "b.hcl"), "2")
	rgit(t, f.reviewer, "add", "b.hcl")
	rgit(t, f.reviewer, "commit", "-q", "-m", "other")
	rgit(t, f.reviewer, "push", "-q", "origin", "other:"+branch)

	err = r.Push(ctx(t), branch, res.Commit)
	if err == nil {
		t.Fatal("push overwrote a branch that moved")
	}
	if errors.Is(err, ErrUnavailable) {
		t.Errorf("a rejected push is not an unreachable remote: %v", err)
	}
	rgit(t, f.reviewer, "fetch", "-q", "origin")
	if got := rgit(t, f.reviewer, "show", "origin/"+branch+":b.hcl"); got != "2" {
		t.Errorf("remote branch changed: %q", got)
	}
}

func TestUnreachableRemoteIsUnavailable(t *testing.T) {
	f := newFixture(t, "main", nil)
	rgit(t, f.work, "remote", "set-url", "origin", filepath.Join(t.TempDir(), "gone.git"))
	r := openRepo(t, f.work)
	err := r.Fetch(ctx(t))
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Fetch from a missing remote = %v, want ErrUnavailable", err)
	}
	var ue *UnavailableError
	if !errors.As(err, &ue) || ue.Op == "" {
		t.Errorf("want *UnavailableError with an operation, got %#v", err)
	}
	if _, err := r.DefaultBranch(ctx(t)); !errors.Is(err, ErrUnavailable) {
		t.Errorf("DefaultBranch = %v, want ErrUnavailable", err)
	}
}

func TestDefaultBranchFollowsRemoteHEAD(t *testing.T) {
	f := newFixture(t, "trunk", nil)
	rgit(t, f.work, "checkout", "-q", "-b", "feature")
	r := openRepo(t, f.work)
	got, err := r.DefaultBranch(ctx(t))
	if err != nil || got != "trunk" {
		t.Fatalf("DefaultBranch = %q, %v; want trunk (the remote's HEAD, not the checked-out feature)", got, err)
	}
}

func TestCommitFilesRejectsBadPathsAndMissingBase(t *testing.T) {
	f := newFixture(t, "main", map[string]string{"plans/a.hcl": "a"})
	r := openRepo(t, f.work)
	if err := r.Fetch(ctx(t)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, base string
	}{
		{"dotdot", "../x.hcl", "main"},
		{"absolute", "/etc/x", "main"},
		{"git dir", ".git/config", "main"},
		{"nested git dir", "a/.GIT/hooks/x", "main"},
		{"unclean", "plans//a.hcl", "main"},
		{"empty", "", "main"},
		{"file is a dir", "plans", "main"},
		{"dir is a file", "plans/a.hcl/b", "main"},
		{"missing base", "ok.hcl", "nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.CommitFiles(CommitRequest{Branch: "b", Base: tc.base, Files: map[string][]byte{tc.path: []byte("x")}, Message: "m"})
			if err == nil {
				t.Fatalf("CommitFiles(%q) succeeded", tc.path)
			}
		})
	}
}

func TestReadFileAtMissing(t *testing.T) {
	f := newFixture(t, "main", nil)
	r := openRepo(t, f.work)
	if err := r.Fetch(ctx(t)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ branch, path string }{{"main", "nope.hcl"}, {"main", "no/dir/x"}, {"nobranch", "README.md"}} {
		b, ok, err := r.ReadFile(tc.branch, tc.path)
		if ok || err != nil || b != nil {
			t.Errorf("ReadFile(%s, %s) = %q, %v, %v; want not found", tc.branch, tc.path, b, ok, err)
		}
	}
	if _, _, err := r.ReadFileAt(plumbing.NewHash("1111111111111111111111111111111111111111"), "x"); err == nil {
		t.Error("ReadFileAt of an unknown commit succeeded")
	}
}
