package gitapprove

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/testkit/githubtest"
)

func approveReq(t *testing.T, repo *Repo, forge Forge, src string) ApproveRequest {
	t.Helper()
	p, diags := hclplan.Parse("plans/refund.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return ApproveRequest{Repo: repo, Forge: forge, Path: "plans/refund.hcl", Src: []byte(src), Plan: p}
}

func TestApproveIsIdempotentAndDiffsAgainstTheApprovedPlan(t *testing.T) {
	v1, err := os.ReadFile(filepath.Join("..", "examples", "refund", "refund.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, "main", nil)
	gh := githubtest.New(t, "acme", "plans", "tok")
	repo := openRepo(t, f.work)

	res, err := Approve(ctx(t), approveReq(t, repo, fakeClient(gh), string(v1)))
	if err != nil {
		t.Fatal(err)
	}
	if res.PR == nil || res.PR.Number != 1 || res.Base != "main" || res.Branch != "planlock/approve/refund-4711" || !res.Changed {
		t.Fatalf("first approve: %+v", res)
	}
	pr := gh.Pull(1)
	if pr.Title != "planlock: approve plan refund-4711" || !strings.Contains(pr.Body, "## Plan `refund-4711`") || !strings.Contains(pr.Body, "This is a new plan") {
		t.Errorf("PR = %q\n%s", pr.Title, pr.Body)
	}
	rgit(t, f.reviewer, "fetch", "-q", "origin")
	tip := rgit(t, f.reviewer, "rev-parse", "origin/planlock/approve/refund-4711")
	if got := rgit(t, f.reviewer, "show", "origin/planlock/approve/refund-4711:plans/refund.hcl"); got != strings.TrimSpace(string(v1)) {
		t.Errorf("committed plan differs from the file")
	}

	// Again, unchanged: same branch tip, same PR, nothing new.
	again, err := Approve(ctx(t), approveReq(t, repo, fakeClient(gh), string(v1)))
	if err != nil || again.PR.Number != 1 || again.Changed || gh.Count() != 1 {
		t.Fatalf("second approve: %+v %v (%d PRs)", again, err, gh.Count())
	}
	rgit(t, f.reviewer, "fetch", "-q", "origin")
	if now := rgit(t, f.reviewer, "rev-parse", "origin/planlock/approve/refund-4711"); now != tip {
		t.Errorf("unchanged approve moved the branch")
	}

	// Edited before review: the same PR gets a new commit and body.
	v2 := strings.Replace(string(v1), "max_calls = 3", "max_calls = 5", 1)
	upd, err := Approve(ctx(t), approveReq(t, repo, fakeClient(gh), v2))
	if err != nil || upd.PR.Number != 1 || !upd.Changed || gh.Count() != 1 {
		t.Fatalf("updated approve: %+v %v", upd, err)
	}
	if !strings.Contains(gh.Pull(1).Body, "at most 5 times") {
		t.Errorf("PR body not updated:\n%s", gh.Pull(1).Body)
	}

	// Merged: approving the same bytes again is a no-op.
	gh.Merge(1, reviewerMerges(t, f, "planlock/approve/refund-4711"))
	done, err := Approve(ctx(t), approveReq(t, repo, fakeClient(gh), v2))
	if err != nil || !done.AlreadyApproved || done.PR != nil {
		t.Fatalf("approve of the merged plan: %+v %v", done, err)
	}

	// A change to the approved plan opens a new PR that says what widens.
	v3 := strings.Replace(v2, "max = 30", "max = 300", 1)
	next, err := Approve(ctx(t), approveReq(t, repo, fakeClient(gh), v3))
	if err != nil || next.PR.Number != 2 {
		t.Fatalf("approve of a change: %+v %v", next, err)
	}
	body := gh.Pull(2).Body
	for _, want := range []string{"## What changes compared with the approved plan on `main`", "**More power**", "maximum widened 30 → 300"} {
		if !strings.Contains(body, want) {
			t.Errorf("PR body lacks %q:\n%s", want, body)
		}
	}
}

func TestApproveWithoutForgePushesAndSaysWhatToDo(t *testing.T) {
	v1, err := os.ReadFile(filepath.Join("..", "examples", "refund", "refund.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, "trunk", nil)
	res, err := Approve(ctx(t), approveReq(t, openRepo(t, f.work), nil, string(v1)))
	if err != nil {
		t.Fatal(err)
	}
	if res.PR != nil || res.Base != "trunk" || !strings.Contains(res.Next, "pushed branch planlock/approve/refund-4711") || !strings.Contains(res.Next, "into trunk") {
		t.Fatalf("result: %+v", res)
	}
	rgit(t, f.reviewer, "fetch", "-q", "origin")
	rgit(t, f.reviewer, "rev-parse", "--verify", "origin/planlock/approve/refund-4711")
}

func TestApproveFailures(t *testing.T) {
	v1, err := os.ReadFile(filepath.Join("..", "examples", "refund", "refund.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, "main", nil)
	req := approveReq(t, openRepo(t, f.work), nil, string(v1))
	req.Base = "release"
	if _, err := Approve(ctx(t), req); err == nil || !strings.Contains(err.Error(), `base branch "release" does not exist`) {
		t.Errorf("missing base: %v", err)
	}
	gh := githubtest.New(t, "acme", "plans", "tok")
	client := fakeClient(gh)
	gh.SetToken("rotated") // the client's token is no longer valid
	req = approveReq(t, openRepo(t, f.work), client, string(v1))
	if _, err := Approve(ctx(t), req); err == nil || !strings.Contains(err.Error(), "Bad credentials") {
		t.Errorf("bad token: %v", err)
	}
}

func TestForgeFor(t *testing.T) {
	f := newFixture(t, "main", nil)
	repo := openRepo(t, f.work)
	if fg, why := forgeFor(repo, Credentials{}); fg != nil || !strings.Contains(why, "GH_TOKEN") {
		t.Errorf("no token: %v %q", fg, why)
	}
	if fg, why := forgeFor(repo, Credentials{GitHubToken: "tok"}); fg != nil || !strings.Contains(why, "not a known GitHub repository") {
		t.Errorf("file remote: %v %q", fg, why)
	}
	rgit(t, f.work, "remote", "set-url", "origin", "git@github.com:acme/plans.git")
	fg, why := forgeFor(repo, Credentials{GitHubToken: "tok"})
	gh, ok := fg.(*GitHub)
	if !ok || why != "" || gh.api != "https://api.github.com" || gh.owner != "acme" || gh.repo != "plans" {
		t.Errorf("github remote: %#v %q", fg, why)
	}
}
