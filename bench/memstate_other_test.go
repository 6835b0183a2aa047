//go:build !linux

package bench

import "errors"

const memStateBase = "/dev/shm"

// memStateDir: a memory filesystem is found only on Linux (see
// memstate_linux_test.go); elsewhere the planlock-memstate setups are skipped.
func memStateDir(string) (string, error) {
	return "", errors.New("state on memory: only measured on Linux (/dev/shm)")
}
