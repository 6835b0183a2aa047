//go:build !linux

package ledger

import "os"

// datasync makes f's written data durable (F_FULLFSYNC on macOS).
func datasync(f *os.File) error { return f.Sync() }
