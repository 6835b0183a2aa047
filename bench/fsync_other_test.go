//go:build !linux

package bench

import "os"

// datasync is the ledger's sync of its journal where there is no
// fdatasync(2).
func datasync(f *os.File) error { return f.Sync() }
