// Package atomicfile replaces a file so that a reader or a crash sees the
// old content or the whole new one, never a part, and never writes through
// a symbolic link planted at the path. The new name is durable when Write
// returns: in the POSIX model a rename survives a power loss only once its
// directory is synced, and a new directory only once its parent is.
package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// Write writes data to path with permissions perm: a temporary file in the
// same directory, synced, renamed over path, then the directory synced.
// The rename replaces a symlink at path itself, not the file it points to.
// The temporary file is removed on any failure.
func Write(path string, data []byte, perm fs.FileMode) error {
	return write(path, data, perm, SyncDir)
}

// write is Write with the directory's sync passed in (tests record it).
func write(path string, data []byte, perm fs.FileMode, syncDir func(string) error) (err error) {
	if fi, lerr := os.Lstat(path); lerr == nil && fi.IsDir() {
		return errors.New("is a directory")
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	renamed := false
	defer func() {
		if err != nil && !renamed {
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
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	renamed = true
	return syncDir(filepath.Dir(path))
}

// MkdirAll is os.MkdirAll whose new directories are durable: each one's
// parent is synced after it was made.
func MkdirAll(dir string, perm fs.FileMode) error {
	return mkdirAll(dir, perm, SyncDir)
}

func mkdirAll(dir string, perm fs.FileMode, syncDir func(string) error) error {
	return MkdirAllFunc(dir, perm, func(made string) error { return syncDir(filepath.Dir(made)) })
}

// MkdirAllFunc is os.MkdirAll that calls made with each directory it
// created, parents first, right after it was made; made makes it durable
// (MkdirAll syncs its parent) and may record it.
func MkdirAllFunc(dir string, perm fs.FileMode, made func(dir string) error) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: errors.New("not a directory")}
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := MkdirAllFunc(parent, perm, made); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, perm); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil // made meanwhile; whoever made it makes it durable
		}
		return err
	}
	return made(dir)
}

// SyncDir makes dir's entries durable (a no-op on Windows, which cannot
// sync a directory and whose NTFS journals the entry with the file).
func SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
