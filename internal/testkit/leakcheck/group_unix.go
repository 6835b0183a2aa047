//go:build unix

package leakcheck

import (
	"os/exec"
	"syscall"
	"time"
)

// OwnGroup makes cmd (not yet started) the leader of a process group of its
// own and, made by exec.CommandContext, its context's cancel kill the whole
// group: what it starts (the stdio server an agent spawns, the upstream
// behind a relay) goes with it. Call EndGroup once cmd has exited.
func OwnGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if cmd.Cancel != nil { // set by exec.CommandContext only
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	}
}

// EndGroup ends what is left of cmd's process group (see OwnGroup) on every
// exit path: it gives the members up to grace to leave by themselves (a
// proxy writing its last audit records after its client went), then kills
// them. A no-op for a command that never started.
func EndGroup(cmd *exec.Cmd, grace time.Duration) {
	if cmd.Process == nil {
		return
	}
	pgid := cmd.Process.Pid
	for deadline := time.Now().Add(grace); len(groupMembers(pgid)) > 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// KillGroup kills cmd's whole process group at once (see OwnGroup): the
// test is done with it.
func KillGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
