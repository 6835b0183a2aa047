//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/planlock/planlock/gitapprove"
)

// ciReconcile plays the workflow's sign and publish jobs after a merge:
// `planlock reconcile` in key mode over a fresh clone of main signs every
// plan and hold file whose bundle is missing or does not verify, and the
// generated workflow's publish script pushes the new bundles onto
// planlock/approvals. It returns reconcile's output.
func (l *loop) ciReconcile() string {
	l.t.Helper()
	ci := filepath.Join(l.t.TempDir(), "ci")
	rgit(l.t, filepath.Dir(ci), "clone", "-q", l.origin, ci)
	runnerTemp := l.t.TempDir()
	out := filepath.Join(runnerTemp, "bundles")
	cmd := exec.Command(l.planlock, "reconcile", "--dir", ci, "--out", out,
		"--signing-key", l.ciKey, "--key", filepath.Join(filepath.Dir(l.ciKey), "ci.pub"), "--tlog-upload=false",
		"--repository", "acme/plans", "--github-api", l.gh.URL())
	// Only what a runner would give it: no GITHUB_* of the machine.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + l.t.TempDir(), "GITHUB_TOKEN=" + ghToken}
	res, err := cmd.CombinedOutput()
	if err != nil {
		l.t.Fatalf("planlock reconcile: %v\n%s", err, res)
	}
	l.t.Logf("reconcile: %s", res)
	publish := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", l.publishScript())
	publish.Dir = l.t.TempDir()
	publish.Env = append(gitEnv(l.t.TempDir()), "RUNNER_TEMP="+runnerTemp, "GITHUB_SHA="+rgit(l.t, ci, "rev-parse", "HEAD"),
		"APPROVALS="+gitapprove.DefaultApprovalsBranch, "ORIGIN="+l.origin, "TOKEN=unused")
	if b, err := publish.CombinedOutput(); err != nil {
		l.t.Fatalf("publish: %v\n%s", err, b)
	}
	return string(res)
}

// publishScript is the generated workflow's publish step, as the runner
// runs it.
func (l *loop) publishScript() string {
	l.t.Helper()
	wf, err := gitapprove.GitHubWorkflow(gitapprove.WorkflowOptions{PlansGlob: "plans/**/*.hcl", PlanlockVersion: "v0.4.0", GoVersion: "1.26.8"})
	if err != nil {
		l.t.Fatal(err)
	}
	var lines []string
	in, inRun := false, false
	sc := bufio.NewScanner(bytes.NewReader(wf))
	for sc.Scan() {
		s := sc.Text()
		switch {
		case strings.HasPrefix(strings.TrimSpace(s), "- name: "):
			in, inRun = strings.TrimSpace(s) == "- name: Push to planlock/approvals", false
		case in && strings.TrimSpace(s) == "run: |":
			inRun = true
		case inRun && (strings.HasPrefix(s, "          ") || s == ""):
			lines = append(lines, strings.TrimPrefix(s, "          "))
		case inRun:
			inRun = false
		}
	}
	if len(lines) == 0 {
		l.t.Fatal("no publish script in the workflow")
	}
	return strings.Join(lines, "\n") + "\n"
}
