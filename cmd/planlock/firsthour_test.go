package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/planlock/planlock/internal/testkit/doctest"
)

// TestFirstHour runs the first hour of a new user, as one terminal session
// (a "cd" lasts): docs/getting-started.md, then the README's "Using it" in
// a checkout of their plans repository, which ends with the design card's
// command, "planlock proxy --plan refund.hcl" in examples/refund of their
// checkout of planlock after building the example server. Unlike TestDocs'
// sandbox, nothing the documents use is made for them: HOME is empty (no
// ~/docs, no config), and what "a Git checkout of your plans repository"
// and "your checkout of planlock" mean is all there is: each a clone of a
// bare origin made with the real git, planlock's holding this work tree's
// files. GitHub is not involved: both origins are local bare repositories,
// so approve pushes its branch without opening a pull request, the
// reviewer's merge is a real git merge pushed from a second clone (the
// README's hidden step), and the author's "git pull" after it must
// succeed. npx is the offline stand-in of upstreams_test.go; go builds
// from this process's module and build caches, offline.
func TestFirstHour(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the documentation's commands")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var script strings.Builder
	var files []string
	add := func(s string, f []string) {
		script.WriteString(s)
		files = append(files, f...)
	}
	// step is a command of the test's own, between the documents'.
	step := func(name, text string) {
		fmt.Fprintf(&script, "# %s\nexec bash -eo pipefail doctest/%s.sh\n", name, name)
		files = append(files, fmt.Sprintf("-- doctest/%s.sh --\n%s%s\n", name, keepCwd, text))
	}

	gs := readSteps(t, root, "docs/getting-started.md", "")
	if len(gs) == 0 {
		t.Fatal("docs/getting-started.md has no steps")
	}
	add(docScript(t, gs, "g"))
	step("to-plans", `cd "$WORK/plans"`)
	using := readSteps(t, root, "README.md", "Using it")
	if len(using) == 0 {
		t.Fatal(`README.md has no "Using it" section with steps`)
	}
	var sawPull, sawCard bool
	for _, s := range using {
		sawPull = sawPull || strings.TrimSpace(strings.SplitN(s.Text, "#", 2)[0]) == "git pull"
		sawCard = sawCard || strings.HasPrefix(s.Text, "planlock proxy --plan refund.hcl ")
	}
	if !sawPull || !sawCard {
		t.Fatalf(`README's "Using it" must run git pull after the merge (%v) and the design card's planlock proxy --plan refund.hcl (%v)`, sawPull, sawCard)
	}
	add(docScript(t, using, "r"))
	// What the steps left behind is what the next Git step accepts: the
	// merge pulled, the approved plan tracked, nothing to repair; the
	// planlock checkout clean (the built server and the bundle ignored).
	step("after", `git -C "$WORK/plans" log -1 --format=%s | grep -Fx 'Merge planlock/approve/read-docs'
test -n "$(git -C "$WORK/plans" ls-files plans/read-docs.hcl)"
git -C "$WORK/plans" diff --quiet HEAD -- plans/
test -x "$WORK/planlock/examples/refund/refund-server"
st="$(git -C "$WORK/planlock" status --porcelain)"; test -z "$st" || { echo "planlock checkout not clean: $st"; exit 1; }`)

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "first_hour.txtar"), []byte(script.String()+strings.Join(files, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:         dir,
		WorkdirRoot: t.TempDir(), // HOME beside $WORK, as in TestDocs
		Setup: func(env *testscript.Env) error {
			return firstHourSandbox(env, root)
		},
	})
}

// readSteps are the steps of the document rel, only those under the "## "
// heading section when it is not "".
func readSteps(t *testing.T, root, rel, section string) []doctest.Step {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := doctest.Extract(rel, src)
	if err != nil {
		t.Fatal(err)
	}
	if section == "" {
		return steps
	}
	from, to := 0, 1<<30
	for i, line := range strings.Split(string(src), "\n") {
		switch {
		case line == "## "+section:
			from = i + 1
		case from > 0 && to == 1<<30 && strings.HasPrefix(line, "## "):
			to = i + 1
		}
	}
	if from == 0 {
		t.Fatalf("%s has no section %q", rel, section)
	}
	var in []doctest.Step
	for _, s := range steps {
		if s.Line > from && s.Line < to {
			in = append(in, s)
		}
	}
	return in
}

// firstHourSandbox is a new user's machine: an empty HOME, a plans
// repository and a checkout of planlock, each cloned from a bare origin.
func firstHourSandbox(env *testscript.Env, root string) error {
	work := env.WorkDir
	home := work + "-home"
	if err := os.MkdirAll(filepath.Join(home, "bin"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(home, "bin", "edit-plan"), []byte(editPlan), 0o755); err != nil {
		return err
	}
	for k, v := range map[string]string{
		"HOME": home, "EDITOR": filepath.Join(home, "bin", "edit-plan"),
		"XDG_STATE_HOME": filepath.Join(home, ".local", "state"), "XDG_CONFIG_HOME": filepath.Join(home, ".config"),
		"XDG_CACHE_HOME": filepath.Join(home, ".cache"), "NO_COLOR": "1", "GIT_CONFIG_NOSYSTEM": "1",
		"GIT_AUTHOR_NAME": "Reader", "GIT_AUTHOR_EMAIL": "reader@example.com",
		"GIT_COMMITTER_NAME": "Reader", "GIT_COMMITTER_EMAIL": "reader@example.com",
		"GITHUB_TOKEN": "", "GH_TOKEN": "", "PLANLOCK_CHECKOUT": filepath.Join(work, "planlock"),
	} {
		env.Setenv(k, v)
	}
	if err := setGoEnv(env); err != nil {
		return err
	}
	git := func(args ...string) error {
		cmd := exec.Command("git", args...)
		cmd.Env = env.Vars
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	// planlock's checkout: the files of this work tree that Git tracks,
	// committed and pushed to a bare stand-in of planlock's repository.
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	src := filepath.Join(home, "src", "planlock")
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		fi, err := os.Lstat(filepath.Join(root, f))
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the work tree, or a link
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, f)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(src, f), b, fi.Mode().Perm()); err != nil {
			return err
		}
	}
	plans := filepath.Join(home, "src", "plans")
	if err := os.MkdirAll(plans, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(plans, "README.md"), []byte("# Plans\n"), 0o644); err != nil {
		return err
	}
	for _, r := range []struct{ src, name string }{{src, "planlock"}, {plans, "plans"}} {
		origin := filepath.Join(home, "origin", r.name+".git")
		for _, args := range [][]string{
			{"init", "-q", "-b", "main", r.src},
			{"-C", r.src, "add", "-A"},
			{"-C", r.src, "commit", "-q", "-m", "initial"},
			{"init", "-q", "--bare", "-b", "main", origin},
			{"-C", r.src, "push", "-q", origin, "main"},
			{"clone", "-q", origin, filepath.Join(work, r.name)},
		} {
			if err := git(args...); err != nil {
				return err
			}
		}
	}
	return os.RemoveAll(filepath.Join(home, "src"))
}
