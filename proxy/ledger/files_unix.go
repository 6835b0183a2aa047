//go:build unix

package ledger

import (
	"io/fs"
	"os"
	"syscall"
)

const (
	oNoFollow    = syscall.O_NOFOLLOW
	permsChecked = true
)

// errLoop is what open(2) returns for a link under O_NOFOLLOW.
var errLoop = syscall.ELOOP

func fileOwner(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

func currentUID() int { return os.Geteuid() }
