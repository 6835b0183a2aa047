package hclplan

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// golden compares got with testdata/<name>, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestFormatGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/fmt/*.in.hcl")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no fmt inputs: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".in.hcl")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			out, diags := Format(in, src)
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			golden(t, filepath.Join("fmt", name+".golden.hcl"), out)
			again, _ := Format(in, out)
			if !bytes.Equal(again, out) {
				t.Errorf("fmt is not idempotent:\n--- once\n%s\n--- twice\n%s", out, again)
			}
			// Formatting never changes meaning.
			p1, d1 := Parse(in, src)
			p2, d2 := Parse(in, out)
			if d1.HasErrors() != d2.HasErrors() {
				t.Fatalf("validity changed: %v / %v", d1, d2)
			}
			if p1 != nil {
				j1, _ := JSON(p1)
				j2, _ := JSON(p2)
				j1 = bytes.Replace(j1, []byte(p1.Digest), nil, 1)
				j2 = bytes.Replace(j2, []byte(p2.Digest), nil, 1)
				if !bytes.Equal(j1, j2) {
					t.Errorf("formatting changed the plan:\n%s\n%s", j1, j2)
				}
			}
		})
	}
}

func TestFormatKeepsComments(t *testing.T) {
	src, _ := os.ReadFile("testdata/fmt/comments.in.hcl")
	out, _ := Format("c.hcl", src)
	for _, c := range []string{"# Leading comment survives.", "# trailing comment", "/* block comment */", "// slash comment"} {
		if !bytes.Contains(out, []byte(c)) {
			t.Errorf("formatted output lost %q", c)
		}
	}
}

func TestFormatExamplesAreCanonical(t *testing.T) {
	files, _ := filepath.Glob("../examples/*/*.hcl")
	for _, f := range files {
		src, _ := os.ReadFile(f)
		out, diags := Format(f, src)
		if diags.HasErrors() || !bytes.Equal(out, src) {
			t.Errorf("%s is not formatted (planlock plan fmt %s)", f, f)
		}
	}
}

func TestFormatRefusesSyntaxErrors(t *testing.T) {
	out, diags := Format("bad.hcl", []byte("plan \"p\" {\n  goal = \n"))
	if !diags.HasErrors() || out != nil {
		t.Fatalf("Format of a broken file = %q, %v", out, diags)
	}
}
