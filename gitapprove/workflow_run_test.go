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

// The sign-on-merge job, run for real against a bare origin: the signing
// command is a stub (keyless signing needs GitHub's OIDC), everything else —
// the diff, the approvals branch, the push — is the workflow's own script.
// Then planlock's Holds.Status reads the published bundle.
func TestSignJobPublishesBundlesWhereHoldsFindThem(t *testing.T) {
	wf, err := GitHubWorkflow(WorkflowOptions{PlansGlob: "plans/**/*.hcl"})
	if err != nil {
		t.Fatal(err)
	}
	signScript := stepScript(t, wf, "Sign changed plans and merged holds")
	publishScript := stepScript(t, wf, "Publish bundles on planlock/approvals")

	f := newFixture(t, "main", map[string]string{"plans/old.hcl": "old\n"})
	stubs := t.TempDir()
	writeFile(t, filepath.Join(stubs, "planlock"), `#!/bin/sh
# stub: planlock sign --kind KIND [--pr N] FILE -> FILE.sigstore.json
[ "$1" = sign ] && [ "$2" = --kind ] || { echo "unexpected: $*" >&2; exit 64; }
for last; do :; done
echo "signed $3 $last" > "$last.sigstore.json"
`)
	writeFile(t, filepath.Join(stubs, "gh"), "#!/bin/sh\nexit 1\n")
	for _, s := range []string{"planlock", "gh"} {
		if err := os.Chmod(filepath.Join(stubs, s), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// One merge: a plan and a hold arrive on main.
	ci := f.reviewer
	before := rgit(t, ci, "rev-parse", "HEAD")
	hold := sampleHold()
	holdSrc, _ := WriteHold(hold)
	writeFile(t, filepath.Join(ci, "plans", "team", "new.hcl"), "new\n")
	writeFile(t, filepath.Join(ci, hold.Path()), string(holdSrc))
	rgit(t, ci, "add", "-A")
	rgit(t, ci, "commit", "-q", "-m", "merge")
	rgit(t, ci, "push", "-q", "origin", "main")

	run := func(before string) {
		tmp := t.TempDir()
		envFile := filepath.Join(tmp, "github_env")
		writeFile(t, envFile, "")
		env := []string{
			"PATH=" + stubs + string(os.PathListSeparator) + os.Getenv("PATH"),
			"RUNNER_TEMP=" + tmp, "GITHUB_ENV=" + envFile, "BEFORE=" + before,
			"GITHUB_SHA=" + rgit(t, ci, "rev-parse", "HEAD"), "GITHUB_REPOSITORY=acme/plans",
			"GH_TOKEN=unused", "APPROVALS=planlock/approvals",
		}
		runStep(t, ci, signScript, env)
		exported, _ := os.ReadFile(envFile)
		runStep(t, ci, publishScript, append(env, strings.Split(strings.TrimSpace(string(exported)), "\n")...))
	}
	run(before)

	repo := openRepo(t, f.work)
	if err := repo.Fetch(ctx(t)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, want string
	}{
		{"plans/team/new.hcl.sigstore.json", "signed plan plans/team/new.hcl\n"},
		{hold.Path() + BundleSuffix, "signed hold " + hold.Path() + "\n"},
		{"plans/old.hcl.sigstore.json", ""}, // unchanged by this merge: not re-signed
	} {
		got, ok, err := repo.ReadFile(DefaultApprovalsBranch, tc.path)
		if err != nil || ok != (tc.want != "") || string(got) != tc.want {
			t.Errorf("approvals:%s = %q, %v, %v; want %q", tc.path, got, ok, err, tc.want)
		}
	}
	// The approvals branch holds bundles only, never the signed files.
	if _, ok, _ := repo.ReadFile(DefaultApprovalsBranch, "plans/team/new.hcl"); ok {
		t.Error("the approvals branch carries a plan file")
	}
	st, err := (&Holds{Repo: repo, Base: "main"}).Status(ctx(t), hold, 0)
	if err != nil || st.State != HoldMerged || string(st.File) != string(holdSrc) || string(st.Bundle) != "signed hold "+hold.Path()+"\n" {
		t.Fatalf("Status after CI: %+v, %v", st, err)
	}

	// A later merge appends to the existing approvals branch; a first push
	// (no usable "before") signs everything there is.
	writeFile(t, filepath.Join(ci, "plans", "later.hcl"), "later\n")
	rgit(t, ci, "add", "-A")
	rgit(t, ci, "commit", "-q", "-m", "later")
	rgit(t, ci, "push", "-q", "origin", "main")
	run("0000000000000000000000000000000000000000")
	if err := repo.Fetch(ctx(t)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"plans/later.hcl.sigstore.json", "plans/old.hcl.sigstore.json", hold.Path() + BundleSuffix} {
		if _, ok, err := repo.ReadFile(DefaultApprovalsBranch, p); !ok || err != nil {
			t.Errorf("after the second run, approvals:%s missing (%v)", p, err)
		}
	}
	if n := rgit(t, ci, "rev-list", "--count", "origin/"+DefaultApprovalsBranch); n != "2" {
		t.Errorf("approvals branch has %s commits, want 2 (one per run)", n)
	}
}
