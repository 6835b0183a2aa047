package datasync

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
)

// Both syncs make a file's data durable without error, and refuse what
// cannot be synced (a pipe) with the same error.
func TestSyncAndRaw(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("{}\n"); err != nil {
		t.Fatal(err)
	}
	for name, sync := range map[string]func(*os.File) error{"Sync": Sync, "Raw": Raw} {
		if err := sync(f); err != nil {
			t.Errorf("%s of a file: %v", name, err)
		}
	}
	if runtime.GOOS != "linux" {
		return // a pipe's File.Sync differs by system
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	plain, raw := Sync(w), Raw(w)
	if !errors.Is(raw, syscall.EINVAL) || !errors.Is(plain, syscall.EINVAL) || raw.Error() != plain.Error() {
		t.Fatalf("of a pipe: Sync %v, Raw %v; want EINVAL from both, alike", plain, raw)
	}
}
