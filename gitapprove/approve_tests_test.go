package gitapprove

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planlock/planlock/internal/testkit/githubtest"
)

// The plan's tests travel in the approval pull request, beside the plan,
// and a change of the tests alone is proposed too.
func TestApproveCommitsThePlansTests(t *testing.T) {
	v1, err := os.ReadFile(filepath.Join("..", "examples", "refund", "refund.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join("..", "examples", "refund", "refund_test.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, "main", nil)
	gh := githubtest.New(t, "acme", "plans", "tok")
	repo := openRepo(t, f.work)
	req := approveReq(t, repo, fakeClient(gh), string(v1))
	req.TestsPath, req.Tests = "plans/refund_test.hcl", tests
	res, err := Approve(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Changed || !strings.Contains(gh.Pull(1).Body, "The plan's tests, `plans/refund_test.hcl`, are in this pull request too") {
		t.Fatalf("approve: %+v\n%s", res, gh.Pull(1).Body)
	}
	rgit(t, f.reviewer, "fetch", "-q", "origin")
	if got := rgit(t, f.reviewer, "show", "origin/planlock/approve/refund-4711:plans/refund_test.hcl"); got != strings.TrimSpace(string(tests)) {
		t.Errorf("committed tests differ from the file")
	}
	// Only the tests changed: a new commit on the same branch.
	req.Tests = append(append([]byte(nil), tests...), []byte("\n# one more comment\n")...)
	upd, err := Approve(ctx(t), req)
	if err != nil || !upd.Changed || upd.AlreadyApproved {
		t.Fatalf("tests changed: %+v %v", upd, err)
	}
}
