//go:build !unix

package proxy

import (
	"os/exec"
	"syscall"
)

// Process groups are a Unix notion: elsewhere the upstream's process alone
// is ended (os.Process.Kill).
func ownGroup(*exec.Cmd) {}

func signalGroup(int, syscall.Signal) bool { return false }

const canSignalGroups = false
