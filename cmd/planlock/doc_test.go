package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/planlock/planlock/internal/testkit/doctest"
)

// TestDocs runs every shell command of README.md and docs/*.md, and every
// --help example (help_run_test.go), in order, in one sandbox per document (testscript): a Git checkout of a
// plans repository with a bare origin, a copy of examples/, an empty HOME,
// and "npx" serving the filesystem server offline
// (upstreams_test.go). A command that fails fails the test. Blocks that
// cannot run here carry a "doctest: skip REASON" comment, listed in the
// test log; package doctest rejects a malformed one.
func TestDocs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the documentation's commands")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, md := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		rel, _ := filepath.Rel(root, md)
		src, err := os.ReadFile(md)
		if err != nil {
			t.Fatal(err)
		}
		steps, err := doctest.Extract(rel, src)
		if err != nil {
			t.Fatal(err)
		}
		script, files := docScript(t, steps, "")
		if len(files) == 0 {
			continue
		}
		base := strings.NewReplacer("/", "_", ".md", "").Replace(rel)
		txtar := script + strings.Join(files, "")
		if err := os.WriteFile(filepath.Join(dir, base+".txtar"), []byte(txtar), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Every --help example too (the reviewed list of help_run_test.go).
	if err := os.WriteFile(filepath.Join(dir, "help_examples.txtar"), []byte(helpExampleScript(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir: dir,
		// HOME is next to $WORK, not in it: a reader's home is not inside
		// the plans checkout (the proxy refuses a config file that is).
		WorkdirRoot: t.TempDir(),
		Setup: func(env *testscript.Env) error {
			return docSandbox(env, root)
		},
	})
}

// docScript is the testscript of steps: one "exec bash" of a file per step
// to run (named doctest/<prefix>NNN.sh), and those files. A skipped step
// is logged, and a planlock command in it must still parse.
func docScript(t *testing.T, steps []doctest.Step, prefix string) (script string, files []string) {
	t.Helper()
	var b strings.Builder
	for i, s := range steps {
		if s.Skip != "" {
			t.Logf("skipped %s (%s): %s", s, s.Skip, strings.SplitN(s.Text, "\n", 2)[0])
			if line := strings.ReplaceAll(s.Text, "\\\n", " "); exampleStart.MatchString(line) {
				if err := checkExample(testApp(), line); err != nil {
					t.Errorf("%s: %v", s, err)
				}
			}
			continue
		}
		name := fmt.Sprintf("doctest/%s%03d.sh", prefix, i)
		fmt.Fprintf(&b, "# %s\nexec bash -eo pipefail %s\n", s, name)
		files = append(files, fmt.Sprintf("-- %s --\n%s%s\n", name, keepCwd, s.Text))
	}
	return b.String(), files
}

// keepCwd starts every command in the directory the one before ended in, as
// in the reader's terminal (a "cd" lasts).
const keepCwd = `cd "$(cat "$WORK/doctest/cwd" 2>/dev/null || pwd)"
trap 'pwd > "$WORK/doctest/cwd"' EXIT
`

// editPlan is the sandbox's $EDITOR: the reader's edit of a plan skeleton,
// which uncomments every suggested step.
const editPlan = `#!/bin/sh
sed -E -i 's/^  # (step |  |\})/  \1/' "$1"
`

// docSandbox prepares the world the documentation assumes.
func docSandbox(env *testscript.Env, root string) error {
	work := env.WorkDir
	home := work + "-home"
	// No ~/docs: a document that shares it makes it (TestFirstHour).
	for _, d := range []string{filepath.Join(home, "bin"), filepath.Join(work, "plans")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(home, "bin", "edit-plan"), []byte(editPlan), 0o755); err != nil {
		return err
	}
	if err := os.CopyFS(filepath.Join(work, "examples"), os.DirFS(filepath.Join(root, "examples"))); err != nil {
		return fmt.Errorf("copy examples: %w", err)
	}
	refund, err := os.ReadFile(filepath.Join(root, "examples", "refund", "refund.hcl"))
	if err != nil {
		return err
	}
	refundTests, err := os.ReadFile(filepath.Join(root, "examples", "refund", "refund_test.hcl"))
	if err != nil {
		return err
	}
	// The help examples name the plan in the current directory or in plans/,
	// with its tests beside it.
	for _, dir := range []string{filepath.Join(work, "plans"), work} {
		if err := os.WriteFile(filepath.Join(dir, "refund.hcl"), refund, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "refund_test.hcl"), refundTests, 0o644); err != nil {
			return err
		}
	}
	// The README's refund block builds the example server with go in
	// "your checkout of planlock": here the plans checkout, given the
	// module's files and the server's package.
	files, err := refundServerFiles()
	if err != nil {
		return err
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(work, f)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(work, f), b, 0o644); err != nil {
			return err
		}
	}
	if err := setGoEnv(env); err != nil {
		return err
	}
	env.Setenv("PLANLOCK_CHECKOUT", work)
	for k, v := range map[string]string{
		"HOME": home, "EDITOR": filepath.Join(home, "bin", "edit-plan"),
		// The defaults, so that the documents' ~/.config/planlock paths hold.
		"XDG_STATE_HOME": filepath.Join(home, ".local", "state"), "XDG_CONFIG_HOME": filepath.Join(home, ".config"),
		"XDG_CACHE_HOME": filepath.Join(home, ".cache"), "NO_COLOR": "1", "GIT_CONFIG_NOSYSTEM": "1",
		"GIT_AUTHOR_NAME": "Reader", "GIT_AUTHOR_EMAIL": "reader@example.com",
		"GIT_COMMITTER_NAME": "Reader", "GIT_COMMITTER_EMAIL": "reader@example.com",
	} {
		env.Setenv(k, v)
	}
	// A plans repository: this checkout, its origin a bare repository.
	origin := filepath.Join(home, "origin.git")
	for _, args := range [][]string{
		{"init", "-q", "--bare", "-b", "main", origin},
		{"init", "-q", "-b", "main", work},
		{"-C", work, "remote", "add", "origin", origin},
		{"-C", work, "add", "examples", "plans"},
		{"-C", work, "commit", "-q", "-m", "plans"},
		{"-C", work, "push", "-q", "-u", "origin", "main"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Env = env.Vars
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// goEnv is the go command's caches of this test's process, so that a go
// build in a sandbox (its own HOME) finds the modules and the builds
// already there, and never the network.
var goEnv = sync.OnceValues(func() ([]string, error) {
	out, err := exec.Command("go", "env", "GOMODCACHE", "GOCACHE", "GOPATH").Output()
	if err != nil {
		return nil, fmt.Errorf("go env: %w", err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n"), nil
})

func setGoEnv(env *testscript.Env) error {
	v, err := goEnv()
	if err != nil {
		return err
	}
	if len(v) != 3 {
		return fmt.Errorf("go env: got %q", v)
	}
	for k, val := range map[string]string{"GOMODCACHE": v[0], "GOCACHE": v[1], "GOPATH": v[2],
		"GOPROXY": "off", "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly"} {
		env.Setenv(k, val)
	}
	return nil
}

// refundServerFiles are the module's files that go build of
// examples/refund/server reads: go.mod, go.sum and the Go files of every
// package of this module it imports.
var refundServerFiles = sync.OnceValues(func() ([]string, error) { return refundServerFilesOf("../..") })

func refundServerFilesOf(root string) ([]string, error) {
	cmd := exec.Command("go", "list", "-deps", "-f", `{{if .Module}}{{if .Module.Main}}{{range .GoFiles}}{{$.Dir}}/{{.}}{{"\n"}}{{end}}{{end}}{{end}}`, "./examples/refund/server")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	files := []string{"go.mod", "go.sum"}
	for _, f := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(abs, f)
		if err != nil {
			return nil, err
		}
		files = append(files, rel)
	}
	return files, nil
}
