//go:build !linux

package leakcheck

import "errors"

// Start is Linux only (PR_SET_CHILD_SUBREAPER; /proc): elsewhere it says so
// and Check finds nothing.
func Start() error { return errors.New("leakcheck: Linux only") }
