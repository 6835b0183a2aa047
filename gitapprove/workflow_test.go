package gitapprove

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runActionlint runs the real linter, pinned by the module's tool directive
// (go tool actionlint), on the workflow files.
func runActionlint(t *testing.T, files ...string) {
	t.Helper()
	cmd := exec.Command("go", append([]string{"tool", "actionlint", "-no-color"}, files...)...)
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("actionlint %s: %v\n%s", strings.Join(files, " "), err, out)
	}
}

// repoWorkflowOptions is how this repository's own workflow is generated:
// it checks and signs the example plans, building planlock from source.
var repoWorkflowOptions = WorkflowOptions{PlansGlob: "examples/**/*.hcl", FromSource: true, GoVersion: "1.26.8"}

// validOptions is a complete set of options the refusal cases start from.
func validOptions() WorkflowOptions {
	return WorkflowOptions{PlansGlob: "plans/**/*.hcl", PlanlockVersion: "v0.4.0", GoVersion: "1.26.8"}
}

func TestGitHubWorkflowGoldenAndActionlint(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for _, tc := range []struct {
		name string
		o    WorkflowOptions
	}{
		{"default", validOptions()},
		{"custom", WorkflowOptions{PlansGlob: "agents/plans/*.hcl", HoldsGlob: "agents/holds/**/*.hcl", Branch: "release/v1", Approvals: "approvals", PlanlockVersion: "v0.3.1", GoVersion: "1.26.0", Schedule: "*/30 * * * *"}},
		{"source", repoWorkflowOptions},
		// A plans repository building planlock from source: planlock's
		// own source, checked out at a commit, not the plans repository.
		{"plans-source", WorkflowOptions{PlansGlob: "plans/**/*.hcl", FromSource: true, SourceCommit: strings.Repeat("ab", 20), GoVersion: "1.26.8"}},
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
		edit func(*WorkflowOptions)
	}{
		{"empty glob", func(o *WorkflowOptions) { o.PlansGlob = "" }},
		{"shell in glob", func(o *WorkflowOptions) { o.PlansGlob = "plans/$(id).hcl" }},
		{"quote in glob", func(o *WorkflowOptions) { o.PlansGlob = `plans/"*.hcl` }},
		{"absolute glob", func(o *WorkflowOptions) { o.PlansGlob = "/etc/*.hcl" }},
		{"parent glob", func(o *WorkflowOptions) { o.PlansGlob = "../*.hcl" }},
		{"not hcl", func(o *WorkflowOptions) { o.PlansGlob = "plans/*" }},
		{"space in branch", func(o *WorkflowOptions) { o.Branch = "main; rm -rf /" }},
		{"approvals is the protected branch", func(o *WorkflowOptions) { o.Branch, o.Approvals = "main", "main" }},
		{"expression in version", func(o *WorkflowOptions) { o.PlanlockVersion = "${{ github.token }}" }},
		{"latest is not a version", func(o *WorkflowOptions) { o.PlanlockVersion = "latest" }},
		{"no version and not from source", func(o *WorkflowOptions) { o.PlanlockVersion = "" }},
		{"version and from source", func(o *WorkflowOptions) { o.FromSource = true }},
		{"bad go version", func(o *WorkflowOptions) { o.GoVersion = "latest\nrun: x" }},
		{"go version not exact", func(o *WorkflowOptions) { o.GoVersion = "stable" }},
		{"go minor only", func(o *WorkflowOptions) { o.GoVersion = "1.26" }},
		{"bad schedule", func(o *WorkflowOptions) { o.Schedule = "@hourly\nrun: x" }},
		{"source commit without from source", func(o *WorkflowOptions) { o.SourceCommit = strings.Repeat("a", 40) }},
		{"short source commit", func(o *WorkflowOptions) { o.PlanlockVersion, o.FromSource, o.SourceCommit = "", true, "abc1234" }},
		{"expression as source commit", func(o *WorkflowOptions) {
			o.PlanlockVersion, o.FromSource, o.SourceCommit = "", true, "${{ github.sha }}"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := validOptions()
			tc.edit(&o)
			if b, err := GitHubWorkflow(o); err == nil {
				t.Fatalf("accepted:\n%s", b)
			}
		})
	}
	if _, err := GitHubWorkflow(validOptions()); err != nil {
		t.Fatalf("the valid base options are refused: %v", err)
	}
}
