package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// memStateBase is where the planlock-memstate setups keep their state: a
// memory filesystem, so the rows show the proxy without the disk.
const memStateBase = "/dev/shm"

// memStateDir makes a fresh directory under base, which must be a directory
// on tmpfs that this process may write; the error says why not otherwise
// (the setup is then skipped, not measured on a disk under a memory label).
func memStateDir(base string) (string, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(base, &st); err != nil {
		return "", fmt.Errorf("state on memory: %w", err)
	}
	if st.Type != unix.TMPFS_MAGIC {
		return "", fmt.Errorf("state on memory: %s is not a memory filesystem (type %#x)", base, st.Type)
	}
	dir, err := os.MkdirTemp(base, "planlock-bench-")
	if err != nil {
		return "", fmt.Errorf("state on memory: %w", err)
	}
	return dir, nil
}

// The state-on-memory directory: made fresh on tmpfs; refused, with the
// reason the benchmark prints when it skips, anywhere else.
func TestMemStateDir(t *testing.T) {
	for _, tt := range []struct{ name, base, err string }{
		{"not tmpfs", "/proc", "/proc is not a memory filesystem (type 0x9fa0)"},
		{"missing", filepath.Join(t.TempDir(), "none"), "no such file or directory"},
		{"disk", t.TempDir(), "is not a memory filesystem"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var st unix.Statfs_t
			if err := unix.Statfs(tt.base, &st); err == nil && st.Type == unix.TMPFS_MAGIC {
				t.Skipf("%s is on tmpfs here", tt.base)
			}
			dir, err := memStateDir(tt.base)
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("memStateDir(%s) = %q, %v; want error %q", tt.base, dir, err, tt.err)
			}
		})
	}
	t.Run("tmpfs", func(t *testing.T) {
		var st unix.Statfs_t
		if err := unix.Statfs(memStateBase, &st); err != nil || st.Type != unix.TMPFS_MAGIC {
			t.Skipf("%s is not tmpfs here", memStateBase)
		}
		a, err := memStateDir(memStateBase)
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(a)
		b, err := memStateDir(memStateBase)
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(b)
		if a == b || filepath.Dir(a) != memStateBase {
			t.Errorf("directories %q and %q: want two fresh ones under %s", a, b, memStateBase)
		}
		if fi, err := os.Stat(a); err != nil || !fi.IsDir() {
			t.Errorf("%s: %v", a, err)
		}
	})
}
