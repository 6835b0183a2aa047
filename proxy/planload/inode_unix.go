//go:build unix

package planload

import (
	"io/fs"
	"syscall"
)

// inodeOf tells a file replaced by rename from the same file rewritten.
func inodeOf(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino) // Ino is not uint64 on every platform
	}
	return 0
}
