package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planlock/planlock/internal/testkit/githubtest"
)

// approve puts the plan's tests in the approval pull request, and refuses
// to propose a plan whose test file is invalid.
func TestApproveCommandWithTests(t *testing.T) {
	t.Setenv("GITHUB_TOKEN", "tok")
	t.Setenv("GH_TOKEN", "")
	work, origin := approveRepo(t)
	gh := githubtest.New(t, "acme", "plans", "tok")
	plan := filepath.Join(work, "plans", "refund.hcl")
	tests := filepath.Join(work, "plans", "refund_test.hcl")
	args := []string{"approve", "--github-api", gh.URL(), "--github-repo", "acme/plans", plan}

	if err := os.WriteFile(tests, []byte("test \"x\" {\n  call {\n    expect = \"perhaps\"\n    tool = \"a\"\n  }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, args...); code != 1 || !strings.Contains(errOut, "refund_test.hcl is not a valid test file") {
		t.Fatalf("invalid tests: exit %d: %s", code, errOut)
	}
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "refund", "refund_test.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tests, src, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI(t, args...); code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	if got := gitRun(t, origin, "show", "planlock/approve/refund-4711:plans/refund_test.hcl"); got != strings.TrimSpace(string(src)) {
		t.Fatalf("the approval branch lacks the tests: %q", got)
	}
	if !strings.Contains(gh.Pull(1).Body, "`plans/refund_test.hcl`") {
		t.Fatalf("the PR body does not mention the tests:\n%s", gh.Pull(1).Body)
	}
}
