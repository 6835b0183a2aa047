package stablefile

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A file written in two halves in place is given out only once whole and
// unchanged on two looks; the first half, seen once, never is.
func TestLookGivesOnlyStableContent(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	write := func(s string, mtime time.Time) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := New(p, 1<<10)
	steps := []struct {
		name   string
		do     func()
		want   string
		wantOK bool
	}{
		{"first sight", func() { write("v1 whole", t0) }, "", false},
		{"unchanged: stable", func() {}, "v1 whole", true},
		{"still unchanged", func() {}, "v1 whole", true},
		{"first half", func() { write("v2 ha", t0.Add(time.Second)) }, "", false},
		{"second half", func() { write("v2 half and half", t0.Add(2*time.Second)) }, "", false},
		{"whole and unchanged", func() {}, "v2 half and half", true},
		{"same bytes, touched", func() { write("v2 half and half", t0.Add(3*time.Second)) }, "", false},
		{"settled again", func() {}, "v2 half and half", true},
		{"same size and time, other bytes", func() { write("v2 HALF and half", t0.Add(3*time.Second)) }, "", false},
		{"replaced by rename", func() {
			q := p + ".new"
			if err := os.WriteFile(q, []byte("v3"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(q, p); err != nil {
				t.Fatal(err)
			}
		}, "", false},
		{"renamed file settled", func() {}, "v3", true},
	}
	for _, s := range steps {
		s.do()
		b, ok, err := f.Look()
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if ok != s.wantOK || ok && string(b) != s.want {
			t.Fatalf("%s: Look = %q, %v; want %q, %v", s.name, b, ok, s.want, s.wantOK)
		}
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := f.Look(); ok || err == nil {
		t.Fatalf("missing file: ok %v, err %v; want an error", ok, err)
	}
	write("v4", t0)
	if _, ok, _ := f.Look(); ok {
		t.Fatal("a file back after an error is stable at first sight")
	}
	if b, ok, _ := f.Look(); !ok || string(b) != "v4" {
		t.Fatalf("Look = %q, %v; want v4", b, ok)
	}
	big := New(p, 1)
	if _, _, err := big.Look(); err == nil {
		t.Fatal("a file over the bound was read")
	}
}
