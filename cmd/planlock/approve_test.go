package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/planlock/planlock/internal/testkit/githubtest"
)

// gitRun runs the real git, isolated from the machine's configuration.
func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+filepath.Join(home, "gitconfig"),
		"GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// approveRepo is a clone of a bare origin (both made by the real git) with
// the refund example plan in plans/.
func approveRepo(t *testing.T) (work, origin string) {
	t.Helper()
	root := t.TempDir()
	origin, work = filepath.Join(root, "origin.git"), filepath.Join(root, "work")
	gitRun(t, root, "init", "-q", "--bare", "-b", "main", origin)
	gitRun(t, root, "clone", "-q", origin, work)
	gitRun(t, work, "checkout", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(work, "README.md"), []byte("plans\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitRun(t, work, "add", "README.md")
	gitRun(t, work, "commit", "-q", "-m", "init")
	gitRun(t, work, "push", "-q", "origin", "main")
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "refund", "refund.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(work, "plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "plans", "refund.hcl"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	return work, origin
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), append([]string{"planlock"}, args...), streams{in: strings.NewReader(""), out: &out, err: &errb})
	return code, out.String(), errb.String()
}

func TestApproveCommand(t *testing.T) {
	t.Setenv("GH_TOKEN", "")
	t.Setenv("GITHUB_TOKEN", "tok")
	t.Setenv("GH_TOKEN", "")
	work, _ := approveRepo(t)
	gh := githubtest.New(t, "acme", "plans", "tok")
	plan := filepath.Join(work, "plans", "refund.hcl")
	args := []string{"approve", "--github-api", gh.URL(), "--github-repo", "acme/plans", plan}

	code, out, errOut := runCLI(t, args...)
	if code != 0 || out != "https://github.example/acme/plans/pull/1\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// Idempotent: the same PR, no second one.
	code, out, _ = runCLI(t, append([]string{"approve", "--json"}, args[1:]...)...)
	var res struct {
		Branch  string `json:"branch"`
		Base    string `json:"base"`
		Changed bool   `json:"changed"`
		PR      struct {
			Number int    `json:"number"`
			State  string `json:"state"`
		} `json:"pull_request"`
	}
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil {
		t.Fatalf("exit %d, %v: %s", code, err, out)
	}
	if res.Branch != "planlock/approve/refund-4711" || res.Base != "main" || res.Changed || res.PR.Number != 1 || res.PR.State != "open" || gh.Count() != 1 {
		t.Errorf("second run: %+v (%d PRs)", res, gh.Count())
	}
	if body := gh.Pull(1).Body; !strings.Contains(body, "## Plan `refund-4711`") {
		t.Errorf("PR body:\n%s", body)
	}
	// The plan is staged as committed, ready for the pull of the merge.
	if st := gitRun(t, work, "status", "--porcelain"); st != "A  plans/refund.hcl" {
		t.Errorf("git status = %q", st)
	}
}

func TestApproveCommandWithoutToken(t *testing.T) {
	t.Setenv("GH_TOKEN", "")
	t.Setenv("GITHUB_TOKEN", "")
	work, origin := approveRepo(t)
	code, out, errOut := runCLI(t, "approve", filepath.Join(work, "plans", "refund.hcl"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "no GH_TOKEN or GITHUB_TOKEN set: pushing the branch only") || !strings.Contains(out, "pushed branch planlock/approve/refund-4711 to origin; open a pull request from it into main") {
		t.Errorf("stdout %q stderr %q", out, errOut)
	}
	if got := gitRun(t, origin, "cat-file", "-p", "planlock/approve/refund-4711:plans/refund.hcl"); !strings.Contains(got, `plan "refund-4711"`) {
		t.Errorf("branch content: %s", got)
	}
}

func TestApproveCommandFailures(t *testing.T) {
	t.Setenv("GH_TOKEN", "")
	t.Setenv("GITHUB_TOKEN", "")
	work, _ := approveRepo(t)
	bad := filepath.Join(work, "plans", "bad.hcl")
	if err := os.WriteFile(bad, []byte(`plan "x" { goal = 1`), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "p.hcl")
	src, _ := os.ReadFile(filepath.Join(work, "plans", "refund.hcl"))
	if err := os.WriteFile(outside, src, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no path", []string{"approve"}, 2, "give exactly one plan file"},
		{"missing file", []string{"approve", filepath.Join(work, "nope.hcl")}, 1, "no such file"},
		{"invalid plan", []string{"approve", bad}, 1, "is not a valid plan"},
		{"not in a repository", []string{"approve", outside}, 1, "open the git repository"},
		{"unknown base", []string{"approve", "--base", "release", filepath.Join(work, "plans", "refund.hcl")}, 1, `base branch "release" does not exist`},
		{"forge flags without a token push only", []string{"approve", "--github-repo", "acme", filepath.Join(work, "plans", "refund.hcl")}, 0, "no GH_TOKEN or GITHUB_TOKEN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d (want %d), stderr %q (want %q)", code, tc.code, errOut, tc.want)
			}
		})
	}
	t.Setenv("GH_TOKEN", "")
	t.Setenv("GITHUB_TOKEN", "tok")
	if code, _, errOut := runCLI(t, "approve", "--github-repo", "acme", filepath.Join(work, "plans", "refund.hcl")); code != 2 || !strings.Contains(errOut, "OWNER/REPO") {
		t.Errorf("--github-repo acme: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "approve", "--github-api", "http://example.com", "--github-repo", "a/b", filepath.Join(work, "plans", "refund.hcl")); code != 2 || !strings.Contains(errOut, "https") {
		t.Errorf("plain-http API: exit %d, %q", code, errOut)
	}
}

// Someone else's commit at the tip of the approval branch: refused with
// their name and the flag; --allow-other-author stacks on it.
func TestApproveCommandOtherAuthor(t *testing.T) {
	t.Setenv("GH_TOKEN", "")
	t.Setenv("GITHUB_TOKEN", "")
	t.Setenv("HOME", t.TempDir()) // planlock commits as planlock <planlock@localhost>
	work, origin := approveRepo(t)
	plan := filepath.Join(work, "plans", "refund.hcl")
	if code, _, errOut := runCLI(t, "approve", plan); code != 0 {
		t.Fatalf("first approve: exit %d: %s", code, errOut)
	}
	other := filepath.Join(t.TempDir(), "other")
	gitRun(t, filepath.Dir(other), "clone", "-q", "-b", "planlock/approve/refund-4711", origin, other)
	src, _ := os.ReadFile(plan)
	if err := os.WriteFile(filepath.Join(other, "plans", "refund.hcl"), bytes.Replace(src, []byte("max_calls = 3"), []byte("max_calls = 5"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	gitRun(t, other, "commit", "-q", "-am", "their edit")
	gitRun(t, other, "push", "-q", "origin", "HEAD:planlock/approve/refund-4711")

	if err := os.WriteFile(plan, bytes.Replace(src, []byte("max_calls = 3"), []byte("max_calls = 1"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, "approve", plan)
	if code != 1 || !strings.Contains(errOut, "by T <t@example.com>, not by you (planlock <planlock@localhost>)") || !strings.Contains(errOut, "--allow-other-author") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "approve", "--allow-other-author", plan); code != 0 {
		t.Fatalf("--allow-other-author: exit %d: %s", code, errOut)
	}
	if got := gitRun(t, origin, "log", "-1", "--format=%an", "planlock/approve/refund-4711"); got != "planlock" {
		t.Errorf("tip author %q, want planlock on top of theirs", got)
	}
}

// A GitHub token is never sent over plain http: approve refuses an http://
// remote on a GitHub host as a usage error before any request is made.
func TestApproveRefusesTokenOverHTTP(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusTeapot)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	t.Setenv("GH_TOKEN", "s3cret")
	t.Setenv("GH_HOST", u.Hostname())
	work, _ := approveRepo(t)
	remote := "http://" + u.Host + "/acme/plans.git"
	gitRun(t, work, "remote", "set-url", "origin", remote)

	code, out, errOut := runCLI(t, "approve", filepath.Join(work, "plans", "refund.hcl"))
	if code != exitUsage || out != "" || !strings.Contains(errOut, "approve: remote "+remote+" is plain http: the GitHub token is only ever sent over https") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 naming the http remote", code, out, errOut)
	}
	if strings.Contains(errOut, "s3cret") {
		t.Fatalf("stderr leaks the token: %q", errOut)
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests reached %s; want none", n, srv.URL)
	}
}

// After approve, the reviewer's merge on the remote and a plain "git pull"
// in the author's clone succeed (with the real git and a bare origin): the
// approved files are staged in the author's index with the bytes that were
// committed, so the pull does not stop at "untracked working tree files
// would be overwritten".
func TestApproveThenPull(t *testing.T) {
	t.Setenv("GH_TOKEN", "")
	t.Setenv("GITHUB_TOKEN", "")
	tests, err := os.ReadFile(filepath.Join("..", "..", "examples", "refund", "refund_test.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		edit  bool       // the plan is on main already; the author changes it
		merge [][]string // the reviewer's commands in the second clone
	}{
		{"edit of a plan on main", true, [][]string{{"merge", "-q", "--no-ff", "-m", "Merge approval", "origin/planlock/approve/refund-4711"}}},
		{"merge commit", false, [][]string{{"merge", "-q", "--no-ff", "-m", "Merge approval", "origin/planlock/approve/refund-4711"}}},
		{"squash", false, [][]string{{"merge", "-q", "--squash", "origin/planlock/approve/refund-4711"}, {"commit", "-q", "-m", "Approve refund-4711"}}},
		{"fast-forward", false, [][]string{{"merge", "-q", "--ff-only", "origin/planlock/approve/refund-4711"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work, origin := approveRepo(t)
			if err := os.WriteFile(filepath.Join(work, "plans", "refund_test.hcl"), tests, 0o644); err != nil {
				t.Fatal(err)
			}
			want := "A  plans/refund.hcl\nA  plans/refund_test.hcl"
			if tc.edit {
				gitRun(t, work, "add", "plans")
				gitRun(t, work, "commit", "-q", "-m", "refund plan")
				gitRun(t, work, "push", "-q", "origin", "main")
				plan := filepath.Join(work, "plans", "refund.hcl")
				src, err := os.ReadFile(plan)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(plan, bytes.Replace(src, []byte("max_calls = 3"), []byte("max_calls = 2"), 1), 0o644); err != nil {
					t.Fatal(err)
				}
				want = "M  plans/refund.hcl"
			}
			if code, _, errOut := runCLI(t, "approve", filepath.Join(work, "plans", "refund.hcl")); code != 0 {
				t.Fatalf("approve: exit %d: %s", code, errOut)
			}
			if st := gitRun(t, work, "status", "--porcelain"); st != want {
				t.Errorf("git status after approve = %q; want %q (staged as committed)", st, want)
			}
			reviewer := filepath.Join(filepath.Dir(work), "reviewer")
			gitRun(t, filepath.Dir(work), "clone", "-q", origin, reviewer)
			for _, args := range tc.merge {
				gitRun(t, reviewer, args...)
			}
			gitRun(t, reviewer, "push", "-q", "origin", "main")
			gitRun(t, work, "pull", "-q", "--no-rebase")
			if st := gitRun(t, work, "status", "--porcelain"); st != "" {
				t.Errorf("git status after pull = %q; want a clean tree", st)
			}
			if head, merged := gitRun(t, work, "rev-parse", "HEAD"), gitRun(t, reviewer, "rev-parse", "HEAD"); head != merged {
				t.Errorf("author's HEAD %s, reviewer's merge %s", head, merged)
			}
		})
	}
}
