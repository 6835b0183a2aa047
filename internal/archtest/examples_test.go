package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// embedderPackages are what a program embedding planlock uses: plan
// parsing, plan loading (read once, verify, parse, admit), the gate, the
// proxy, its state and the trust policy. Each shows its use in a runnable
// Example.
var embedderPackages = []string{"hclplan", "proxy/planload", "proxy/gate", "proxy", "proxy/ledger", "sign"}

// examplesIn returns the names of the Example functions of dir's tests
// that go test runs: an "// Output:" comment checks what they print.
func examplesIn(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse %s: %v", f, err)
		}
		for _, d := range af.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Example") || fn.Type.Params.NumFields() > 0 {
				continue
			}
			for _, cg := range af.Comments {
				if cg.Pos() > fn.Body.Lbrace && cg.End() < fn.Body.Rbrace && strings.Contains(cg.Text(), "Output:") {
					out = append(out, fn.Name.Name)
					break
				}
			}
		}
	}
	return out
}

// TestEmbedderPackagesHaveExamples: every package an embedder uses has an
// Example whose output go test checks.
func TestEmbedderPackagesHaveExamples(t *testing.T) {
	for _, pkg := range embedderPackages {
		if ex := examplesIn(t, filepath.Join("..", "..", pkg)); len(ex) == 0 {
			t.Errorf("%s: no Example with checked output; an embedder's package shows its use", pkg)
		}
	}
}

// TestExamplesInSeesExamples: the check finds an Example with output and
// passes over one without.
func TestExamplesInSeesExamples(t *testing.T) {
	dir := t.TempDir()
	src := "package a\n\nimport \"fmt\"\n\nfunc ExampleA() {\n\tfmt.Println(1)\n\t// Output: 1\n}\n\nfunc ExampleB() {\n\tfmt.Println(2)\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "a_test.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := examplesIn(t, dir); len(got) != 1 || got[0] != "ExampleA" {
		t.Fatalf("examplesIn = %v, want [ExampleA]", got)
	}
}
