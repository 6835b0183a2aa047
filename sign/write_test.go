package sign

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteBundle(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, dir, target string) // prepares the target path
		check func(t *testing.T, dir string)
	}{
		{"new file", func(*testing.T, string, string) {}, nil},
		{"replaces an existing bundle", func(t *testing.T, _ string, target string) {
			writeTestFile(t, target, "old bundle")
		}, nil},
		{"a symlink is replaced, its target untouched", func(t *testing.T, dir, target string) {
			writeTestFile(t, filepath.Join(dir, "elsewhere"), "precious")
			if err := os.Symlink(filepath.Join(dir, "elsewhere"), target); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, dir string) {
			if got, _ := os.ReadFile(filepath.Join(dir, "elsewhere")); string(got) != "precious" {
				t.Errorf("symlink target rewritten: %q", got)
			}
		}},
		{"a dangling symlink is replaced, nothing created behind it", func(t *testing.T, dir, target string) {
			if err := os.Symlink(filepath.Join(dir, "created"), target); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, dir string) {
			if _, err := os.Lstat(filepath.Join(dir, "created")); !os.IsNotExist(err) {
				t.Errorf("file created through a dangling symlink: %v", err)
			}
		}},
	}
	data := []byte(`{"bundle":true}` + "\n")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(dir, "plan.hcl.sigstore.json")
			tc.setup(t, dir, target)
			if err := WriteBundle(target, data); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Lstat(target)
			if err != nil {
				t.Fatal(err)
			}
			if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
				t.Errorf("bundle is %v, want a regular 0644 file", fi.Mode())
			}
			if got, _ := os.ReadFile(target); !bytes.Equal(got, data) {
				t.Errorf("bundle = %q, want %q", got, data)
			}
			if tc.check != nil {
				tc.check(t, dir)
			}
			assertNoTempFiles(t, dir)
		})
	}
}

func TestWriteBundleFailures(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, path, want string }{
		{"a directory", filepath.Join(dir, "sub"), "is a directory"},
		{"no such directory", filepath.Join(dir, "missing", "b.json"), "no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := WriteBundle(tc.path, []byte("x"))
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line with %q", err, tc.want)
			}
			assertNoTempFiles(t, dir)
		})
	}
}

func writeTestFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func assertNoTempFiles(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
}
