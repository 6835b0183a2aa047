//go:build windows

package ledger

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// tryLock takes an exclusive lock on f without waiting. It reports false when
// another process holds it.
func tryLock(f *os.File) (bool, error) {
	// Windows locks are mandatory: lock one byte far past any real data so
	// readers such as "planlock holds list" can still read the file.
	ol := &windows.Overlapped{Offset: 0xFFFFFFFE, OffsetHigh: 0x7FFFFFFF}
	err := windows.LockFileEx(windows.Handle(f.Fd()),
		windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return false, nil
	}
	return err == nil, err
}

// syncDir is a no-op: Windows cannot fsync a directory, and NTFS journals
// the entry with the file.
func syncDir(string) error { return nil }
