//go:build !linux

package proxy

import "errors"

// waitExit is not available here: a dead upstream is noticed by the next call.
func waitExit(int) error { return errors.New("not supported on this system") }

// exitedNow is not known here.
func exitedNow(int) bool { return false }

// exitStatusNow is not known here.
func exitStatusNow(int) (string, bool) { return "", false }

// pipeUnread is not known here: a lost call may or may not have been read.
func pipeUnread(any) (int, bool) { return 0, false }
