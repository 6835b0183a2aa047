package plandiff

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func BenchmarkDiff(b *testing.B) {
	old := parsePlanFile(b, filepath.Join("testdata", "plandiff", "widen", "old.hcl"))
	proposed := parsePlanFile(b, filepath.Join("testdata", "plandiff", "widen", "new.hcl"))
	for b.Loop() {
		_ = Format("main", Diff(old, proposed))
	}
}
