//go:build !linux

package datasync

import "os"

// Sync makes f's written data durable.
func Sync(f *os.File) error { return f.Sync() }

// Raw is Sync: raw system calls are Linux only.
func Raw(f *os.File) error { return Sync(f) }
