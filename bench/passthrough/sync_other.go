//go:build !linux

package main

import "os"

// datasync is the journal's sync where there is no fdatasync(2).
func datasync(f *os.File) error { return f.Sync() }
