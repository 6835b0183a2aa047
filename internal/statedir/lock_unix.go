//go:build unix

package statedir

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockRoot serializes the processes preparing state directories under
// root (a migration reads and moves the directories of others).
func lockRoot(root string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(root, ".layout.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the state root: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock the state root: %w", err)
	}
	return func() { f.Close() }, nil
}
