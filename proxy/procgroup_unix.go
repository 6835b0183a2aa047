//go:build unix

package proxy

import (
	"errors"
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in a process group of its own, so that the proxy can
// end the upstream together with what it started (npx's node, a shell's
// children) and a terminal's Ctrl-C reaches the proxy, which ends them.
func ownGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// signalGroup sends sig to the process group that pid leads; false when
// the group has no process left.
func signalGroup(pid int, sig syscall.Signal) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(-pid, sig)
	return !errors.Is(err, syscall.ESRCH)
}

const canSignalGroups = true
