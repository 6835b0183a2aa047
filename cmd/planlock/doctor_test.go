package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/internal/testkit/githubtest"
)

// planlock doctor against the GitHub fake: with the ruleset planlock init
// github writes every check passes; without it, and without the workflow,
// each missing protection is one FAIL line and the exit status is 1.
func TestDoctor(t *testing.T) {
	t.Setenv("GITHUB_TOKEN", "tok")
	t.Setenv("GH_TOKEN", "")
	full := []map[string]any{
		githubtest.PullRequestRule(1, true, true, true),
		{"type": "required_status_checks", "ruleset_source_type": "Repository", "ruleset_source": "acme/plans", "ruleset_id": 42,
			"parameters": map[string]any{"required_status_checks": []any{map[string]any{"context": gitapprove.CheckName}}}},
	}
	for _, tc := range []struct {
		name    string
		rules   []map[string]any
		setup   bool // init github, commit, publish an approvals branch
		code    int
		want    []string
		wantNot []string
	}{
		{"protected and set up", full, true, 0, []string{
			"ok   branch main requires a pull request", "ok   branch main requires code-owner review",
			"ok   every action in it is pinned by commit SHA", "ok   branch planlock/approvals exists",
			"--certificate-identity https://github.com/acme/plans/.github/workflows/planlock.yml@refs/heads/main",
		}, []string{"FAIL"}},
		{"nothing set up", nil, false, 1, []string{
			"FAIL branch main requires a pull request", "FAIL branch main requires code-owner review",
			"FAIL branch main requires the \"planlock check\" check", "FAIL .github/workflows/planlock.yml is missing",
			"FAIL branch planlock/approvals exists",
		}, nil},
		{"review without code owners", []map[string]any{githubtest.PullRequestRule(1, false, true, true)}, true, 1, []string{
			"ok   branch main requires a pull request", "FAIL branch main requires code-owner review",
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work, _ := approveRepo(t)
			gh := githubtest.New(t, "acme", "plans", "tok")
			gh.SetBranchRules("main", tc.rules...)
			if tc.setup {
				if code, _, e := runCLI(t, "init", "github", "--dir", work, "--planlock-version", "v0.4.0", "--go-version", "1.26.8", "--owner", "@acme/approvers"); code != 0 {
					t.Fatal(e)
				}
				gitRun(t, work, "add", "-A")
				gitRun(t, work, "commit", "-q", "-m", "planlock")
				gitRun(t, work, "push", "-q", "origin", "main")
				gitRun(t, work, "push", "-q", "origin", "main:refs/heads/planlock/approvals")
			}
			code, out, errOut := runCLI(t, "doctor", "--dir", work, "--github-api", gh.URL(), "--github-repo", "acme/plans")
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s%s", code, tc.code, out, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(out, w) {
					t.Errorf("output has %q:\n%s", w, out)
				}
			}
		})
	}
}

// planlock approve warns, and still opens the pull request, when the base
// branch does not require the review planlock's approvals rely on.
func TestApproveWarnsAboutMissingProtection(t *testing.T) {
	t.Setenv("GITHUB_TOKEN", "tok")
	t.Setenv("GH_TOKEN", "")
	for _, tc := range []struct {
		name  string
		rules []map[string]any
		warn  bool
	}{
		{"no rules", nil, true},
		{"full rules", []map[string]any{githubtest.PullRequestRule(1, true, true, true),
			{"type": "required_status_checks", "parameters": map[string]any{"required_status_checks": []any{map[string]any{"context": gitapprove.CheckName}}}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work, _ := approveRepo(t)
			gh := githubtest.New(t, "acme", "plans", "tok")
			gh.SetBranchRules("main", tc.rules...)
			code, out, errOut := runCLI(t, "approve", "--github-api", gh.URL(), "--github-repo", "acme/plans", filepath.Join(work, "plans", "refund.hcl"))
			if code != 0 || !strings.Contains(out, "/pull/1") {
				t.Fatalf("exit %d, %q, %q", code, out, errOut)
			}
			warned := strings.Contains(errOut, "WARNING: branch main does not require a pull request")
			if warned != tc.warn {
				t.Errorf("warned=%v, want %v: %q", warned, tc.warn, errOut)
			}
			if !tc.warn && strings.Contains(errOut, "WARNING") {
				t.Errorf("unexpected warning: %q", errOut)
			}
		})
	}
}

// The proxy checks the protection at start when it opens hold pull
// requests on GitHub: a warning, not a refusal.
func TestProxyWarnsAboutMissingProtection(t *testing.T) {
	t.Setenv("GITHUB_TOKEN", "tok")
	t.Setenv("GH_TOKEN", "")
	for _, tc := range []struct {
		name  string
		rules []map[string]any
		warn  bool
	}{
		{"no rules", nil, true},
		{"code owners required", []map[string]any{githubtest.PullRequestRule(1, true, true, true),
			{"type": "required_status_checks", "parameters": map[string]any{"required_status_checks": []any{map[string]any{"context": gitapprove.CheckName}}}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work, _ := approveRepo(t)
			gh := githubtest.New(t, "acme", "plans", "tok")
			gh.SetBranchRules("main", tc.rules...)
			plan := filepath.Join(work, "plans", "p.hcl")
			if err := os.WriteFile(plan, []byte("plan \"p\" {\n  goal = \"echo once\"\n  step \"a\" {\n    tool = \"echo\"\n  }\n}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, errOut := runCLI(t, "proxy", "--plan", plan, "--insecure-skip-verify",
				"--state", t.TempDir(), "--github-api", gh.URL(), "--github-repo", "acme/plans", "--", "sh", "-c", "exit 0")
			if !strings.Contains(errOut, "holds become approval pull requests") {
				t.Fatalf("the proxy did not set up hold pull requests: %q", errOut)
			}
			warned := strings.Contains(errOut, "WARNING: branch main does not require a pull request")
			if warned != tc.warn || (!tc.warn && strings.Contains(errOut, "WARNING: branch")) {
				t.Errorf("warned=%v, want %v: %q", warned, tc.warn, errOut)
			}
		})
	}
}
