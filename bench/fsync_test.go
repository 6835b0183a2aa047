package bench

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/planlock/planlock/internal/datasync"
)

// BenchmarkFdatasync is one 400-byte append and fdatasync in a temporary
// directory (where the benchmarks keep the proxy's state): the disk's floor
// for counting a call durably before forwarding it.
func BenchmarkFdatasync(b *testing.B) {
	sync := fdatasyncProbe(b)
	for b.Loop() {
		sync()
	}
}

// fdatasyncProbe returns a function that appends 400 bytes to a file in a
// temporary directory and syncs it as the ledger syncs its journal; the
// file is closed at the end of the benchmark.
func fdatasyncProbe(b *testing.B) func() {
	f, err := os.Create(filepath.Join(b.TempDir(), "floor"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	rec := make([]byte, 400)
	return func() {
		if _, err := f.Write(rec); err != nil {
			b.Fatal(err)
		}
		if err := datasync.Sync(f); err != nil {
			b.Fatal(err)
		}
	}
}
