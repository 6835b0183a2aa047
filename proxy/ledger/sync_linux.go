//go:build linux

package ledger

import (
	"os"
	"syscall"
)

// datasync makes f's written data durable. fdatasync is enough for an
// append-only file: it also flushes the size needed to read the data back.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
