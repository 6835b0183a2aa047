// Package atomicfile replaces a file so that a reader or a crash sees the
// old content or the whole new one, never a part, and never writes through
// a symbolic link planted at the path.
package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Write writes data to path with permissions perm: a temporary file in the
// same directory, synced, then renamed over path. The rename replaces a
// symlink at path itself, not the file it points to. The temporary file is
// removed on any failure.
func Write(path string, data []byte, perm fs.FileMode) (err error) {
	if fi, lerr := os.Lstat(path); lerr == nil && fi.IsDir() {
		return errors.New("is a directory")
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	// CreateTemp makes the file 0600.
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
