package gitapprove

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// stepScript extracts the run: | script of the named step from a workflow.
func stepScript(t *testing.T, wf []byte, name string) string {
	t.Helper()
	var out []string
	in, inRun := false, false
	sc := bufio.NewScanner(strings.NewReader(string(wf)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(strings.TrimSpace(line), "- name: "):
			in = strings.TrimSpace(line) == "- name: "+name
			inRun = false
		case in && strings.TrimSpace(line) == "run: |":
			inRun = true
		case inRun && (strings.HasPrefix(line, "          ") || line == ""):
			out = append(out, strings.TrimPrefix(line, "          "))
		case inRun:
			inRun = false
		}
	}
	if len(out) == 0 {
		t.Fatalf("no run script for step %q", name)
	}
	return strings.Join(out, "\n") + "\n"
}

// runStep runs a step's script as GitHub's runner does (bash -eo pipefail)
// in dir, with stub planlock and gh commands on PATH.
func runStep(t *testing.T, dir, script string, env []string) {
	t.Helper()
	cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(gitEnv(t.TempDir()), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("step failed: %v\n%s\n--- script\n%s", err, out, script)
	}
}

// The sign and publish jobs' scripts, run for real against a bare origin:
// planlock reconcile is a stub that "signs" the files it is told are
// missing (keyless signing needs GitHub's OIDC; cmd/planlock tests the real
// command the same way with a key), everything else — the artifact layout,
// the approvals branch, the push — is the workflow's own script. Then
// planlock's Holds.Status reads the published bundle.
func TestSignAndPublishJobsPublishWhereHoldsFindThem(t *testing.T) {
	wf, err := GitHubWorkflow(validOptions())
	if err != nil {
		t.Fatal(err)
	}
	signScript := stepScript(t, wf, "Sign every plan and hold without a valid approval")
	publishScript := stepScript(t, wf, "Push to planlock/approvals")

	f := newFixture(t, "main", map[string]string{"plans/old.hcl": "old\n"})
	stubs := t.TempDir()
	// stub: planlock reconcile --out DIR ...: "signs" the files listed in
	// $MISSING, as the real command writes them: DIR/<path>.sigstore.json
	// and the manifest.
	writeFile(t, filepath.Join(stubs, "planlock"), `#!/bin/sh
[ "$1" = reconcile ] && [ "$2" = --out ] || { echo "unexpected: $*" >&2; exit 64; }
out="$3"
mkdir -p "$out"
: > "$out/planlock-reconcile.txt"
for f in $MISSING; do
  mkdir -p "$out/$(dirname "$f")"
  echo "signed $f" > "$out/$f.sigstore.json"
  echo "$f" >> "$out/planlock-reconcile.txt"
done
`)
	if err := os.Chmod(filepath.Join(stubs, "planlock"), 0o755); err != nil {
		t.Fatal(err)
	}

	ci := f.reviewer
	hold := sampleHold()
	holdSrc, _ := WriteHold(hold)
	writeFile(t, filepath.Join(ci, "plans", "team", "new.hcl"), "new\n")
	writeFile(t, filepath.Join(ci, hold.Path()), string(holdSrc))
	rgit(t, ci, "add", "-A")
	rgit(t, ci, "commit", "-q", "-m", "merge")
	rgit(t, ci, "push", "-q", "origin", "main")

	run := func(missing string) {
		tmp := t.TempDir()
		env := []string{
			"PATH=" + stubs + string(os.PathListSeparator) + os.Getenv("PATH"),
			"RUNNER_TEMP=" + tmp, "GITHUB_SHA=" + rgit(t, ci, "rev-parse", "HEAD"),
			"GITHUB_SERVER_URL=https://github.com", "GITHUB_REPOSITORY=acme/plans",
			"GH_TOKEN=unused", "MISSING=" + missing,
			// The publish job's own environment: the origin is the bare repository here.
			"APPROVALS=planlock/approvals", "ORIGIN=" + f.origin, "TOKEN=unused",
		}
		runStep(t, ci, signScript, env)
		// The artifact travels between the jobs: the publish job has no checkout.
		runStep(t, t.TempDir(), publishScript, env)
	}
	run("plans/team/new.hcl " + hold.Path())

	repo := openRepo(t, f.work)
	if err := repo.Fetch(ctx(t)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{"plans/team/new.hcl.sigstore.json", "signed plans/team/new.hcl\n"},
		{hold.Path() + BundleSuffix, "signed " + hold.Path() + "\n"},
		{"plans/old.hcl.sigstore.json", ""},
	} {
		got, ok, err := repo.ReadFile(DefaultApprovalsBranch, tc.path)
		if err != nil || ok != (tc.want != "") || string(got) != tc.want {
			t.Errorf("approvals:%s = %q, %v, %v; want %q", tc.path, got, ok, err, tc.want)
		}
	}
	if _, ok, _ := repo.ReadFile(DefaultApprovalsBranch, "plans/team/new.hcl"); ok {
		t.Error("the approvals branch carries a plan file")
	}
	st, err := (&Holds{Repo: repo, Base: "main"}).Status(ctx(t), hold, 0)
	if err != nil || st.State != HoldMerged || string(st.File) != string(holdSrc) || string(st.Bundle) != "signed "+hold.Path()+"\n" {
		t.Fatalf("Status after CI: %+v, %v", st, err)
	}

	// A later run adds to the existing branch; a run with nothing missing
	// publishes nothing.
	run("plans/old.hcl")
	run("")
	if err := repo.Fetch(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := repo.ReadFile(DefaultApprovalsBranch, "plans/old.hcl.sigstore.json"); !ok || err != nil {
		t.Errorf("after the second run, approvals:plans/old.hcl.sigstore.json missing (%v)", err)
	}
	if n := rgit(t, ci, "fetch", "-q", "origin"); n != "" {
		t.Log(n)
	}
	if n := rgit(t, ci, "rev-list", "--count", "origin/"+DefaultApprovalsBranch); n != "2" {
		t.Errorf("approvals branch has %s commits, want 2 (one per run that signed)", n)
	}
}

// The publish job refuses symlinks: in the artifact, and on the approvals
// branch, where a symlinked directory would send a bundle elsewhere.
func TestPublishJobRefusesSymlinks(t *testing.T) {
	wf, err := GitHubWorkflow(validOptions())
	if err != nil {
		t.Fatal(err)
	}
	publishScript := stepScript(t, wf, "Push to planlock/approvals")
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, f fixture, artifact string)
	}{
		{"symlink in the artifact", func(t *testing.T, f fixture, artifact string) {
			if err := os.Symlink("/etc/passwd", filepath.Join(artifact, "plans", "a.hcl.sigstore.json")); err != nil {
				t.Fatal(err)
			}
		}},
		{"symlink on the approvals branch", func(t *testing.T, f fixture, artifact string) {
			writeFile(t, filepath.Join(artifact, "plans", "a.hcl.sigstore.json"), "bundle\n")
			w := f.reviewer
			rgit(t, w, "checkout", "-q", "--orphan", "appr")
			rgit(t, w, "rm", "-rfq", ".")
			if err := os.Symlink("/tmp", filepath.Join(w, "plans")); err != nil {
				t.Fatal(err)
			}
			rgit(t, w, "add", "plans")
			rgit(t, w, "commit", "-q", "-m", "evil")
			rgit(t, w, "push", "-q", "origin", "HEAD:refs/heads/"+DefaultApprovalsBranch)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "main", nil)
			tmp := t.TempDir()
			artifact := filepath.Join(tmp, "bundles")
			writeFile(t, filepath.Join(artifact, "planlock-reconcile.txt"), "plans/a.hcl\n")
			if err := os.MkdirAll(filepath.Join(artifact, "plans"), 0o755); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, f, artifact)
			before := rgit(t, f.reviewer, "ls-remote", "origin")
			cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", publishScript)
			cmd.Dir = t.TempDir()
			cmd.Env = append(gitEnv(t.TempDir()), "RUNNER_TEMP="+tmp, "GITHUB_SHA=abc", "APPROVALS="+DefaultApprovalsBranch, "ORIGIN="+f.origin, "TOKEN=unused")
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), "refusing") {
				t.Fatalf("publish accepted it: %v\n%s", err, out)
			}
			if after := rgit(t, f.reviewer, "ls-remote", "origin"); after != before {
				t.Errorf("origin changed:\n%s\n->\n%s", before, after)
			}
		})
	}
}
