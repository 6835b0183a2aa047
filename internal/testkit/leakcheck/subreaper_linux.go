package leakcheck

import (
	"fmt"
	"syscall"
)

const prSetChildSubreaper = 36 // PR_SET_CHILD_SUBREAPER, linux/prctl.h

// Start makes the calling process the subreaper of its descendants, so that
// orphans are reparented to it (and found by Check) rather than to init.
func Start() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return fmt.Errorf("leakcheck: prctl(PR_SET_CHILD_SUBREAPER): %w", errno)
	}
	return nil
}
