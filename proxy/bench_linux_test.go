package proxy

import (
	"context"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/planlock/planlock/proxy/ledger"
)

// fsyncState writes one record and fdatasyncs it per reservation and does
// nothing else: the disk's floor for at-most-once counting, measured on the
// call path.
type fsyncState struct {
	noState
	f *os.File
}

func (s fsyncState) Reserve(context.Context, ledger.Reservation) (ledger.Ticket, error) {
	if _, err := s.f.Write(make([]byte, 400)); err != nil {
		return ledger.Ticket{}, err
	}
	return ledger.Ticket{}, unix.Fdatasync(int(s.f.Fd()))
}

func BenchmarkProxyStdioFsyncFloor(b *testing.B) {
	f, err := os.Create(b.TempDir() + "/floor")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	benchStdio(b, fsyncState{f: f})
}
