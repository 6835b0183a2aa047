package bench

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkFdatasync is one 400-byte append and fdatasync in a temporary
// directory (where the benchmarks keep the proxy's state): the disk's floor
// for counting a call durably before forwarding it.
func BenchmarkFdatasync(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "floor"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	rec := make([]byte, 400)
	for b.Loop() {
		if _, err := f.Write(rec); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
	}
}
