package gitapprove

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// actionlint is pinned; the test runs the real linter from the Go module proxy.
const actionlintPkg = "github.com/rhysd/actionlint/cmd/actionlint@v1.7.12"

func runActionlint(t *testing.T, files ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("actionlint is fetched from the module proxy; skipped with -short")
	}
	cmd := exec.Command("go", append([]string{"run", actionlintPkg, "-no-color"}, files...)...)
	cmd.Dir = t.TempDir() // outside this module: go run pkg@version ignores go.mod
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("actionlint %s: %v\n%s", strings.Join(files, " "), err, out)
	}
}

// repoWorkflowOptions is how this repository's own workflow is generated:
// it checks and signs the example plans, building planlock from source.
var repoWorkflowOptions = WorkflowOptions{PlansGlob: "examples/**/*.hcl", FromSource: true, GoVersion: "1.26.8"}

func TestGitHubWorkflowGoldenAndActionlint(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for _, tc := range []struct {
		name string
		o    WorkflowOptions
	}{
		{"default", WorkflowOptions{PlansGlob: "plans/**/*.hcl"}},
		{"custom", WorkflowOptions{PlansGlob: "agents/plans/*.hcl", HoldsGlob: "agents/holds/**/*.hcl", Branch: "release/v1", Approvals: "approvals", PlanlockVersion: "v0.3.1", GoVersion: "1.26"}},
		{"source", repoWorkflowOptions},
	} {
		b, err := GitHubWorkflow(tc.o)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		golden(t, filepath.Join("workflow", tc.name+".yml"), b)
		p := filepath.Join(dir, tc.name+".yml")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	runActionlint(t, files...)
}

// The repository's own workflows pass actionlint, and its planlock.yml is
// exactly what planlock init github generates for examples/.
func TestRepositoryWorkflows(t *testing.T) {
	want, err := GitHubWorkflow(repoWorkflowOptions)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", WorkflowPath))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s is not what planlock init github writes for examples/; regenerate it", WorkflowPath)
	}
	files, err := filepath.Glob(filepath.Join("..", ".github", "workflows", "*.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no workflows: %v", err)
	}
	for i, f := range files {
		if files[i], err = filepath.Abs(f); err != nil {
			t.Fatal(err)
		}
	}
	runActionlint(t, files...)
}

func TestGitHubWorkflowRefusesUnsafeOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    WorkflowOptions
	}{
		{"empty glob", WorkflowOptions{}},
		{"shell in glob", WorkflowOptions{PlansGlob: "plans/$(id).hcl"}},
		{"quote in glob", WorkflowOptions{PlansGlob: `plans/"*.hcl`}},
		{"absolute glob", WorkflowOptions{PlansGlob: "/etc/*.hcl"}},
		{"parent glob", WorkflowOptions{PlansGlob: "../*.hcl"}},
		{"not hcl", WorkflowOptions{PlansGlob: "plans/*"}},
		{"space in branch", WorkflowOptions{PlansGlob: "plans/*.hcl", Branch: "main; rm -rf /"}},
		{"approvals is the protected branch", WorkflowOptions{PlansGlob: "plans/*.hcl", Branch: "main", Approvals: "main"}},
		{"expression in version", WorkflowOptions{PlansGlob: "plans/*.hcl", PlanlockVersion: "${{ github.token }}"}},
		{"bad go version", WorkflowOptions{PlansGlob: "plans/*.hcl", GoVersion: "latest\nrun: x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if b, err := GitHubWorkflow(tc.o); err == nil {
				t.Fatalf("accepted:\n%s", b)
			}
		})
	}
}
