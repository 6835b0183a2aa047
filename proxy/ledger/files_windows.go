//go:build windows

package ledger

import (
	"errors"
	"io/fs"
)

// Windows has no O_NOFOLLOW: openState checks the path with Lstat after
// opening instead (sameFile).
const (
	oNoFollow    = 0
	permsChecked = false // Windows modes do not say who may write
)

var errLoop = errors.New("symbolic link")

// fileOwner is unknown on Windows: the ACLs of the profile directory protect
// the state directory.
func fileOwner(fs.FileInfo) (int, bool) { return 0, false }

func currentUID() int { return -1 }
