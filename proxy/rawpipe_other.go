//go:build !linux

package proxy

import "os"

// Raw pipe I/O is Linux only (rawpipe_linux.go): elsewhere the client's and
// the upstream's pipes are read and written as files.

func pollableStdio(any, bool) *os.File { return nil }

func rawIO[F any](f F) F { return f }
