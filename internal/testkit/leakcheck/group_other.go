//go:build !unix

package leakcheck

import (
	"os/exec"
	"time"
)

// OwnGroup, EndGroup and KillGroup fall back to the command alone where
// there are no process groups.
func OwnGroup(cmd *exec.Cmd) {}

func EndGroup(cmd *exec.Cmd, grace time.Duration) { KillGroup(cmd) }

func KillGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
