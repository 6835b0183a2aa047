package sign

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteBundle writes data to path through a temporary file in the same
// directory, renamed over path. The rename replaces a symlink at path
// itself, never the file it points to, so a planted link cannot make
// signing overwrite another file; readers never see a half-written bundle.
func WriteBundle(path string, data []byte) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if base == "" {
		return fmt.Errorf("write bundle %s: not a file name", path)
	}
	if fi, err := os.Lstat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("write bundle %s: is a directory", path)
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("write bundle %s: %w", path, err)
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	// CreateTemp makes the file 0600; bundles are public, as before (0644).
	if err := tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("write bundle %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write bundle %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write bundle %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write bundle %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		done = true
		return fmt.Errorf("write bundle %s: %w", path, err)
	}
	done = true
	return nil
}
