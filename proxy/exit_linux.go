package proxy

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

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

// exitedNow reports whether the child pid has exited (not reaped).
func exitedNow(pid int) bool {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		// Linux fills si_signo (SIGCHLD) only when a child has exited;
		// with WNOHANG and none, it leaves it zero.
		return err == nil && info.Signo != 0
	}
}

// pipeUnread is how many bytes written to the pipe w (a writing end) are
// still unread; false when w is not a pipe or the count cannot be read.
func pipeUnread(w any) (int, bool) {
	f, ok := w.(*os.File)
	if !ok || f == nil {
		return 0, false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, false
	}
	n, ierr := 0, error(nil)
	if cerr := rc.Control(func(fd uintptr) {
		var st unix.Stat_t
		if ierr = unix.Fstat(int(fd), &st); ierr == nil && st.Mode&unix.S_IFMT != unix.S_IFIFO {
			ierr = unix.ENOTSUP
			return
		}
		if ierr == nil {
			n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCINQ) // FIONREAD
		}
	}); cerr != nil || ierr != nil {
		return 0, false
	}
	return n, true
}

// exitStatusNow is the exit status of the child pid once it has exited
// (not reaped), worded as os.ProcessState words it; false while it runs.
func exitStatusNow(pid int) (string, bool) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || info.Signo == 0 {
			return "", false
		}
		break
	}
	// x/sys leaves siginfo's union unnamed: for SIGCHLD it is si_pid,
	// si_uid, si_status, after the three ints padded to a word.
	word := unsafe.Sizeof(uintptr(0))
	union := (12 + word - 1) / word * word
	status := *(*int32)(unsafe.Add(unsafe.Pointer(&info), union+8))
	const cldExited, cldKilled, cldDumped = 1, 2, 3 // <asm-generic/siginfo.h>
	switch info.Code {
	case cldExited:
		return fmt.Sprintf("exit status %d", status), true
	case cldKilled, cldDumped:
		return "signal: " + unix.SignalName(syscall.Signal(status)), true
	}
	return "exited", true
}
