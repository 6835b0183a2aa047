//go:build !linux

package proxy

import "errors"

// waitExit is not available here: a dead upstream is noticed by the next call.
func waitExit(int) error { return errors.New("not supported on this system") }
