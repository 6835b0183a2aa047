package datasync

import (
	"os"
	"syscall"
)

// Sync makes f's written data durable.
func Sync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}

// Raw is Sync with raw fdatasync(2) calls, which do not go through the
// scheduler's system call hand-off: the goroutine keeps its P while the
// disk flushes, and a GC pause waits for it. For a caller that waits for
// the sync anyway and would otherwise wake the runtime's monitor thread
// (ledger.Options.RawAppends).
func Raw(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		for {
			_, _, errno = syscall.RawSyscall(syscall.SYS_FDATASYNC, fd, 0, 0)
			if errno != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if errno != 0 {
		return errno
	}
	return nil
}
