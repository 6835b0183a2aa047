package proxy

import "golang.org/x/sys/unix"

// waitExit blocks until the child pid exits, without reaping it (WNOWAIT):
// the transport's own Wait still collects its status.
func waitExit(pid int) error {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err
		}
	}
}
