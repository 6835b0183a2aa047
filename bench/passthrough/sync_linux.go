package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// datasync is fdatasync(2), as planlock's ledger syncs its journal on Linux.
func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
