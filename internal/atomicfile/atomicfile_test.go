package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "out")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	if err := Write(link, []byte("new"), 0o640); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Fatalf("the link's target was written: %q", b)
	}
	fi, err := os.Lstat(link)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o640 {
		t.Fatalf("out: %v, %v; want a regular 0640 file", fi, err)
	}
	if b, _ := os.ReadFile(link); string(b) != "new" {
		t.Fatalf("out = %q", b)
	}
	// Failures leave no temporary file behind.
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "sub"), "is a directory"},
		{filepath.Join(dir, "missing", "f"), "no such file or directory"},
	} {
		if err := Write(tc.path, []byte("x"), 0o600); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Write(%s) = %v, want %q", tc.path, err, tc.want)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

// TestNamesAreDurable: the rename and every new directory are followed by
// a sync of the directory that holds the new name.
func TestNamesAreDurable(t *testing.T) {
	root := t.TempDir()
	var synced []string
	rec := func(dir string) error {
		synced = append(synced, dir)
		return SyncDir(dir)
	}
	dir := filepath.Join(root, "a", "b")
	if err := mkdirAll(dir, 0o700, rec); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "f")
	if err := write(path, []byte("x"), 0o600, rec); err != nil {
		t.Fatal(err)
	}
	want := []string{root, filepath.Join(root, "a"), dir}
	if strings.Join(synced, " ") != strings.Join(want, " ") {
		t.Fatalf("synced %q, want %q (each new name's directory, after it was made)", synced, want)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "x" {
		t.Fatalf("read back %q, %v", b, err)
	}
	// A failed directory sync is an error of Write: the name may not last.
	fail := func(string) error { return os.ErrPermission }
	if err := write(path, []byte("y"), 0o600, fail); err == nil {
		t.Fatal("Write returned nil although the directory could not be synced")
	}
}
