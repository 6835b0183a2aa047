package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/internal/testkit/githubtest"
)

// git runs the real git in dir with an isolated configuration.
func rgit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitTestEnv(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func gitTestEnv(t *testing.T) []string {
	home := t.TempDir()
	return append(os.Environ(), "HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+filepath.Join(home, ".gitconfig"),
		"GIT_AUTHOR_NAME=Merger", "GIT_AUTHOR_EMAIL=merger@example.com", "GIT_COMMITTER_NAME=Merger", "GIT_COMMITTER_EMAIL=merger@example.com")
}

// planlockRun runs the CLI in this process and returns its exit code and output.
func planlockRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), append([]string{"planlock"}, args...), streams{in: strings.NewReader(""), out: &out, err: &errOut})
	return code, out.String(), errOut.String()
}

// publishScript is the generated workflow's publish step, as the runner runs it.
func publishScript(t *testing.T) string {
	t.Helper()
	wf, err := gitapprove.GitHubWorkflow(gitapprove.WorkflowOptions{PlansGlob: "plans/**/*.hcl", PlanlockVersion: "v0.4.0", GoVersion: "1.26.8"})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	in, inRun := false, false
	sc := bufio.NewScanner(bytes.NewReader(wf))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(strings.TrimSpace(l), "- name: "):
			in, inRun = strings.TrimSpace(l) == "- name: Push to planlock/approvals", false
		case in && strings.TrimSpace(l) == "run: |":
			inRun = true
		case inRun && (strings.HasPrefix(l, "          ") || l == ""):
			lines = append(lines, strings.TrimPrefix(l, "          "))
		case inRun:
			inRun = false
		}
	}
	if len(lines) == 0 {
		t.Fatal("no publish script in the workflow")
	}
	return strings.Join(lines, "\n") + "\n"
}

// Three merges land on main; the workflow run of the middle one never
// happens (cancelled, failed, lost). The next run reconciles: it signs the
// two files without a valid approval, and all three end up signed, each
// recording the pull request that merged it and who approved it.
func TestReconcileSignsWhatAMissedRunLeft(t *testing.T) {
	root := t.TempDir()
	origin, work := filepath.Join(root, "origin.git"), filepath.Join(root, "work")
	rgit(t, root, "init", "--bare", "-q", "-b", "main", origin)
	rgit(t, root, "clone", "-q", origin, work)
	rgit(t, work, "checkout", "-q", "-b", "main")
	keys := filepath.Join(root, "keys")
	if code, _, e := planlockRun(t, "keygen", "--out-dir", keys, "--name", "ci"); code != 0 {
		t.Fatalf("keygen: %s", e)
	}
	gh := githubtest.New(t, "acme", "plans", "tok")
	t.Setenv("GITHUB_TOKEN", "tok")
	t.Setenv("GH_TOKEN", "")
	t.Setenv("GITHUB_ACTIONS", "")
	t.Setenv("GITHUB_REPOSITORY", "")
	t.Setenv("GITHUB_EVENT_PATH", "")
	t.Setenv("GITHUB_SHA", "")
	t.Setenv("GITHUB_REF", "")

	merge := func(n int, path, content string, reviews ...map[string]any) string {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(work, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, path), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		rgit(t, work, "add", "-A")
		rgit(t, work, "commit", "-q", "-m", "Merge pull request #"+string(rune('0'+n)))
		rgit(t, work, "push", "-q", "origin", "main")
		sha := rgit(t, work, "rev-parse", "HEAD")
		gh.AddPull(githubtest.Pull{Number: n, Title: path, Head: "planlock/plan/" + path, Base: "main", HeadSHA: strings.Repeat("c", 40), State: "open"})
		for _, r := range reviews {
			gh.AddReview(n, r)
		}
		gh.Merge(n, sha)
		return sha
	}
	review := func(login, state string) map[string]any {
		return map[string]any{"id": 1, "user": map[string]any{"login": login, "type": "User"}, "state": state, "commit_id": strings.Repeat("c", 40), "submitted_at": "2026-11-30T11:00:00Z", "body": ""}
	}
	trust := []string{"--key", filepath.Join(keys, "ci.pub"), "--tlog-upload=false"}
	ciRun := func() {
		ci := filepath.Join(t.TempDir(), "ci")
		rgit(t, root, "clone", "-q", origin, ci)
		out := filepath.Join(t.TempDir(), "bundles")
		args := append([]string{"reconcile", "--dir", ci, "--out", out, "--signing-key", filepath.Join(keys, "ci.key"),
			"--repository", "acme/plans", "--github-api", gh.URL()}, trust...)
		if code, stdout, stderr := planlockRun(t, args...); code != 0 {
			t.Fatalf("reconcile: exit %d\n%s%s", code, stdout, stderr)
		}
		cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", publishScript(t))
		cmd.Dir = t.TempDir()
		cmd.Env = append(gitTestEnv(t), "RUNNER_TEMP="+filepath.Dir(out), "GITHUB_SHA="+rgit(t, ci, "rev-parse", "HEAD"),
			"APPROVALS=planlock/approvals", "ORIGIN="+origin, "TOKEN=unused")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("publish: %v\n%s", err, b)
		}
	}

	merge(1, "plans/a.hcl", "plan a\n", review("alice", "APPROVED"))
	ciRun()
	// The middle merge: its run never happens.
	merge(2, "plans/b.hcl", "plan b\n", review("alice", "APPROVED"), review("bob", "CHANGES_REQUESTED"), review("bob", "APPROVED"), review("carol", "COMMENTED"))
	merge(3, "holds/refund/h1.hcl", "hold 1\n", review("dave", "APPROVED"), review("erin", "APPROVED"), review("erin", "DISMISSED"))
	ciRun()

	// Nothing is left to sign.
	check := filepath.Join(t.TempDir(), "check")
	rgit(t, root, "clone", "-q", origin, check)
	rgit(t, check, "fetch", "-q", "origin", "planlock/approvals")
	code, stdout, stderr := planlockRun(t, append([]string{"reconcile", "--dir", check, "--dry-run"}, trust...)...)
	if code != 0 || !strings.Contains(stdout, "0 of 3 files need signing.") {
		t.Fatalf("after the runs: exit %d\n%s%s", code, stdout, stderr)
	}
	// Each bundle verifies and records its own pull request and approvers.
	for _, tc := range []struct {
		path, kind string
		pr         int
		approvers  []string
	}{
		{"plans/a.hcl", "plan", 1, []string{"alice"}},
		{"plans/b.hcl", "plan", 2, []string{"alice", "bob"}},
		{"holds/refund/h1.hcl", "hold", 3, []string{"dave"}},
	} {
		bundle := filepath.Join(t.TempDir(), "b.json")
		if err := os.WriteFile(bundle, []byte(rgit(t, check, "show", "origin/planlock/approvals:"+tc.path+".sigstore.json")), 0o644); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := planlockRun(t, "verify", "--json", "--kind", tc.kind, "--bundle", bundle, "--path", tc.path, "--key", filepath.Join(keys, "ci.pub"), filepath.Join(check, tc.path))
		if code != 0 {
			t.Fatalf("verify %s: exit %d\n%s%s", tc.path, code, stdout, stderr)
		}
		// The human-readable form names them too.
		if code, text, _ := planlockRun(t, "verify", "--kind", tc.kind, "--bundle", bundle, "--path", tc.path, "--key", filepath.Join(keys, "ci.pub"), filepath.Join(check, tc.path)); code != 0 || !strings.Contains(text, "approved by "+strings.Join(tc.approvers, ", ")+")") {
			t.Errorf("verify %s: %q", tc.path, text)
		}
		var res []verifyResult
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatal(err)
		}
		if p := res[0].Predicate; p.PullRequest != tc.pr || !reflect.DeepEqual(p.Approvers, tc.approvers) || p.Repository != "acme/plans" {
			t.Errorf("%s: pull request %d approvers %v repository %q; want %d %v", tc.path, p.PullRequest, p.Approvers, p.Repository, tc.pr, tc.approvers)
		}
	}
}

// A bundle that does not verify (here: signed by another key) counts as
// missing: reconcile signs the file again rather than trusting the branch.
func TestReconcileResignsABundleThatDoesNotVerify(t *testing.T) {
	root := t.TempDir()
	origin, work := filepath.Join(root, "origin.git"), filepath.Join(root, "work")
	rgit(t, root, "init", "--bare", "-q", "-b", "main", origin)
	rgit(t, root, "clone", "-q", origin, work)
	rgit(t, work, "checkout", "-q", "-b", "main")
	keys := filepath.Join(root, "keys")
	for _, n := range []string{"ci", "other"} {
		if code, _, e := planlockRun(t, "keygen", "--out-dir", keys, "--name", n); code != 0 {
			t.Fatalf("keygen: %s", e)
		}
	}
	t.Setenv("GITHUB_TOKEN", "")
	t.Setenv("GH_TOKEN", "")
	if err := os.MkdirAll(filepath.Join(work, "plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "plans", "a.hcl"), []byte("plan a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rgit(t, work, "add", "-A")
	rgit(t, work, "commit", "-q", "-m", "a")
	rgit(t, work, "push", "-q", "origin", "main")
	// An approvals branch whose bundle another key signed.
	if code, _, e := planlockRun(t, "sign", "--key", filepath.Join(keys, "other.key"), "--tlog-upload=false", "--path", "plans/a.hcl", "--out", filepath.Join(root, "evil.json"), filepath.Join(work, "plans", "a.hcl")); code != 0 {
		t.Fatalf("sign: %s", e)
	}
	evil, _ := os.ReadFile(filepath.Join(root, "evil.json"))
	rgit(t, work, "checkout", "-q", "--orphan", "appr")
	rgit(t, work, "rm", "-rfq", ".")
	if err := os.MkdirAll(filepath.Join(work, "plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "plans", "a.hcl.sigstore.json"), evil, 0o644); err != nil {
		t.Fatal(err)
	}
	rgit(t, work, "add", "-A")
	rgit(t, work, "commit", "-q", "-m", "evil")
	rgit(t, work, "push", "-q", "origin", "HEAD:refs/heads/planlock/approvals")

	ci := filepath.Join(root, "ci")
	rgit(t, root, "clone", "-q", origin, ci)
	out := filepath.Join(root, "out")
	code, stdout, stderr := planlockRun(t, "reconcile", "--dir", ci, "--out", out, "--signing-key", filepath.Join(keys, "ci.key"), "--key", filepath.Join(keys, "ci.pub"), "--tlog-upload=false")
	if code != 0 || !strings.Contains(stdout, "plans/a.hcl: signed plan (bundle does not verify") {
		t.Fatalf("reconcile: exit %d\n%s%s", code, stdout, stderr)
	}
	if m, _ := os.ReadFile(filepath.Join(out, "planlock-reconcile.txt")); string(m) != "plans/a.hcl\n" {
		t.Errorf("manifest = %q", m)
	}
	// In a run for another commit than the checkout, the predicate would
	// name a commit whose bytes were not signed: refused.
	t.Setenv("GITHUB_REPOSITORY", "acme/plans")
	t.Setenv("GITHUB_SHA", strings.Repeat("f", 40))
	t.Setenv("GITHUB_EVENT_PATH", "")
	if code, _, stderr := planlockRun(t, "reconcile", "--dir", ci, "--out", filepath.Join(root, "out2"), "--signing-key", filepath.Join(keys, "ci.key"), "--key", filepath.Join(keys, "ci.pub"), "--tlog-upload=false"); code != exitFailure || !strings.Contains(stderr, "check out the run's commit") {
		t.Errorf("commit mismatch: exit %d, %q", code, stderr)
	}
	t.Setenv("GITHUB_REPOSITORY", "")
	t.Setenv("GITHUB_SHA", "")
	// Usage errors are told apart from failures.
	for _, args := range [][]string{
		{"reconcile", "--dir", ci, "--key", filepath.Join(keys, "ci.pub")},                                          // no --out
		{"reconcile", "--dir", ci, "--dry-run"},                                                                     // no trust policy
		{"reconcile", "--dir", ci, "--dry-run", "--plans-glob", "../*.hcl", "--key", filepath.Join(keys, "ci.pub")}, // escapes the repository
	} {
		if code, _, stderr := planlockRun(t, args...); code != exitUsage || stderr == "" {
			t.Errorf("%v: exit %d, %q; want a usage error", args, code, stderr)
		}
	}
}
