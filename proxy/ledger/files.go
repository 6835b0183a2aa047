package ledger

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Every file of the state directory and the journal are opened through
// openState: never through a symbolic link (another user, or the agent, could
// point one at a file the proxy would then overwrite or trust), and only when
// no other user can write them. They are created 0600; the directory 0700.

// checkMode refuses what another user could write: a file or directory that
// is group- or world-writable, or owned by another uid. what names it in the
// error ("state directory", "audit log", ...).
func checkMode(what, path string, fi fs.FileInfo, wantDir bool) error {
	switch {
	case wantDir && !fi.IsDir():
		return fmt.Errorf("%w: %s %s is not a directory", ErrUnsafe, what, path)
	case !wantDir && !fi.Mode().IsRegular():
		return fmt.Errorf("%w: %s %s is not a regular file (%s)", ErrUnsafe, what, path, fi.Mode().Type())
	case permsChecked && fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%w: %s %s is writable by other users (mode %04o); run chmod go-w %s", ErrUnsafe, what, path, fi.Mode().Perm(), path)
	}
	if uid, ok := fileOwner(fi); ok && uid != currentUID() {
		return fmt.Errorf("%w: %s %s is owned by uid %d, not by this user (uid %d)", ErrUnsafe, what, path, uid, currentUID())
	}
	return nil
}

// prepareDir creates dir (0700) if needed, durably (a state directory a
// power loss removes would start from zero counts), and refuses it if it is
// not safe.
func (t tracer) prepareDir(what, dir string) error {
	if err := t.mkdirAll(dir); err != nil {
		return fmt.Errorf("create %s: %w", what, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return checkMode(what, dir, fi, true)
}

// checkParent refuses a directory that others can write without the sticky
// bit: they could replace the files in it.
func checkParent(what, dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if permsChecked && fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return fmt.Errorf("%w: the directory %s of the %s is writable by other users (mode %04o); run chmod go-w %s",
			ErrUnsafe, dir, what, fi.Mode().Perm(), dir)
	}
	return nil
}

// openState opens a state file without following a symbolic link, creating
// it 0600 when flags say so, and refuses it when it is not a regular file of
// this user that only this user can write. The check is made on the open
// file, so the path cannot be swapped in between.
func openState(what, path string, flags int) (*os.File, error) {
	f, err := os.OpenFile(path, flags|oNoFollow, 0o600)
	if err != nil {
		if isSymlinkErr(path, err) {
			return nil, fmt.Errorf("%w: %s %s is a symbolic link; planlock never follows one for its state", ErrUnsafe, what, path)
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = checkMode(what, path, fi, false)
	}
	if err == nil {
		err = sameFile(what, path, fi)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// sameFile checks, on systems without O_NOFOLLOW, that the path still names
// the opened file and is not a link.
func sameFile(what, path string, opened fs.FileInfo) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 || !os.SameFile(fi, opened) {
		return fmt.Errorf("%w: %s %s is a symbolic link or was replaced while opening it", ErrUnsafe, what, path)
	}
	return nil
}

func isSymlinkErr(path string, err error) bool {
	if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return true
	}
	return errors.Is(err, errLoop)
}

// readState reads a small state file (at most max bytes) through openState.
func readState(what, path string, max int64) ([]byte, error) {
	f, err := openState(what, path, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s %s is larger than %d bytes", what, path, max)
	}
	return data, nil
}

// writeStateAtomic replaces dir/name with data: a temporary file in the same
// directory (never a link), synced, renamed over it, and the directory synced.
func (t tracer) writeStateAtomic(what, dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+".tmp")
	f, err := t.create(what, tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	t.wrote(tmp, 0, data)
	t.syncing(tmp)
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := t.rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	return t.syncDir(dir)
}
