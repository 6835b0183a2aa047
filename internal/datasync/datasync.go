// Package datasync makes a file's written data durable: fdatasync(2) on
// Linux, enough for an append-only file since it also flushes the size
// needed to read the data back; File.Sync elsewhere (F_FULLFSYNC on macOS).
// The ledger syncs its journal with it, and the benchmarks their floors, so
// that both make the same system call.
package datasync
