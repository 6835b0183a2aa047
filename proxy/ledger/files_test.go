//go:build unix

package ledger

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStateFilesAreSafe: the state directory and every file in it are
// refused when another user could write them, when they are symbolic links,
// or when another uid owns them; nothing is opened through a link.
func TestStateFilesAreSafe(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string) Options
		wantErr string
	}{
		{"world-writable state directory", func(t *testing.T, dir string) Options {
			chmod(t, dir, 0o777)
			return Options{Dir: dir}
		}, "state directory " + "%DIR%" + " is writable by other users (mode 0777)"},
		{"group-writable state directory", func(t *testing.T, dir string) Options {
			chmod(t, dir, 0o770)
			return Options{Dir: dir}
		}, "is writable by other users (mode 0770)"},
		{"state directory is a file", func(t *testing.T, dir string) Options {
			p := filepath.Join(dir, "f")
			os.WriteFile(p, nil, 0o600)
			return Options{Dir: p}
		}, "create state directory"},
		{"world-writable audit log", func(t *testing.T, dir string) Options {
			chmod(t, filepath.Join(dir, auditName), 0o666)
			return Options{Dir: dir}
		}, "audit log %DIR%/audit.jsonl is writable by other users (mode 0666)"},
		{"audit log through a symbolic link", func(t *testing.T, dir string) Options {
			relink(t, filepath.Join(dir, auditName))
			return Options{Dir: dir}
		}, "audit log %DIR%/audit.jsonl is a symbolic link"},
		{"checkpoint through a symbolic link", func(t *testing.T, dir string) Options {
			relink(t, filepath.Join(dir, checkpointName))
			return Options{Dir: dir}
		}, "checkpoint %DIR%/checkpoint.json is a symbolic link"},
		{"anchor through a symbolic link", func(t *testing.T, dir string) Options {
			relink(t, filepath.Join(dir, anchorName))
			return Options{Dir: dir}
		}, "anchor %DIR%/head is a symbolic link"},
		{"lock file through a symbolic link", func(t *testing.T, dir string) Options {
			relink(t, filepath.Join(dir, lockName))
			return Options{Dir: dir}
		}, "lock file %DIR%/lock is a symbolic link"},
		{"binding through a symbolic link", func(t *testing.T, dir string) Options {
			relink(t, filepath.Join(dir, bindingName))
			return Options{Dir: dir}
		}, "state binding %DIR%/ledger.json is a symbolic link"},
		{"group-writable checkpoint", func(t *testing.T, dir string) Options {
			chmod(t, filepath.Join(dir, checkpointName), 0o620)
			return Options{Dir: dir}
		}, "checkpoint %DIR%/checkpoint.json is writable by other users (mode 0620)"},
		{"audit log in a directory others can write", func(t *testing.T, dir string) Options {
			other := filepath.Join(t.TempDir(), "shared")
			os.Mkdir(other, 0o700)
			chmod(t, other, 0o777)
			return Options{Dir: t.TempDir(), AuditPath: filepath.Join(other, "audit.jsonl")}
		}, "the directory %OTHER% of the audit log is writable by other users (mode 0777)"},
		{"audit log owned by another user", func(t *testing.T, dir string) Options {
			if os.Geteuid() != 0 {
				t.Skip("needs root to give a file away")
			}
			if err := os.Chown(filepath.Join(dir, auditName), 4321, 4321); err != nil {
				t.Fatal(err)
			}
			return Options{Dir: dir}
		}, "audit log %DIR%/audit.jsonl is owned by uid 4321"},
		{"state directory owned by another user", func(t *testing.T, dir string) Options {
			if os.Geteuid() != 0 {
				t.Skip("needs root to give a directory away")
			}
			if err := os.Chown(dir, 4321, 4321); err != nil {
				t.Fatal(err)
			}
			return Options{Dir: dir}
		}, "state directory %DIR% is owned by uid 4321"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			reserveN(t, dir, 2) // every state file exists
			o := tt.setup(t, dir)
			want := strings.ReplaceAll(tt.wantErr, "%DIR%", dir)
			if o.AuditPath != "" {
				want = strings.ReplaceAll(want, "%OTHER%", filepath.Dir(o.AuditPath))
			}
			l, err := Open(ctx, o)
			if err == nil {
				l.Close()
				t.Fatalf("Open succeeded, want %q", want)
			}
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("Open: %v\nwant %q", err, want)
			}
			if !errors.Is(err, ErrUnsafe) && !strings.Contains(tt.name, "is a file") {
				t.Fatalf("Open: %v, want ErrUnsafe", err)
			}
		})
	}
}

// TestStateFilesCreatedPrivate: a new state directory is 0700 and every file
// in it 0600, whatever the umask.
func TestStateFilesCreatedPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	reserveN(t, dir, 2)
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("state directory mode %v (%v), want 0700", fi.Mode().Perm(), err)
	}
	entries, _ := os.ReadDir(dir)
	names := map[string]bool{}
	for _, e := range entries {
		fi, _ := e.Info()
		names[e.Name()] = true
		if fi.Mode().Perm() != 0o600 || !fi.Mode().IsRegular() {
			t.Errorf("%s: mode %v, want a regular file 0600", e.Name(), fi.Mode())
		}
	}
	for _, n := range []string{auditName, lockName, bindingName, checkpointName, anchorName} {
		if !names[n] {
			t.Errorf("no %s in the state directory", n)
		}
	}
}

// TestTempFileLinkNotFollowed: a link planted where the checkpoint's
// temporary file goes is not written through.
func TestTempFileLinkNotFollowed(t *testing.T) {
	dir := t.TempDir()
	reserveN(t, dir, 1)
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("keep"), 0o600)
	if err := os.Symlink(victim, filepath.Join(dir, checkpointName+".tmp")); err != nil {
		t.Fatal(err)
	}
	before := mustRead(t, filepath.Join(dir, checkpointName))
	reserveN(t, dir, 1)
	if got := string(mustRead(t, victim)); got != "keep" {
		t.Fatalf("the link was followed: victim holds %q", got)
	}
	// The checkpoint is a cache: not replaced, and the state still opens.
	if string(mustRead(t, filepath.Join(dir, checkpointName))) != string(before) {
		t.Fatal("checkpoint replaced through a planted link")
	}
	l := openT(t, Options{Dir: dir})
	if got := l.Progress(digest).Calls(0); got != 2 {
		t.Fatalf("calls %d, want 2", got)
	}
}

func chmod(t *testing.T, path string, mode fs.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// relink replaces path with a symbolic link to a copy of it.
func relink(t *testing.T, path string) {
	t.Helper()
	cp := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(cp, mustRead(t, path), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(cp, path); err != nil {
		t.Fatal(err)
	}
}
