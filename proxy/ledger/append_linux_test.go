package ledger

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// RawAppends changes how records reach the file, not what is written:
// the same calls on the same clock give the same journal, which verifies.
func TestRawAppendsWriteTheSameJournal(t *testing.T) {
	journal := func(raw bool) []byte {
		t.Helper()
		now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
		l := openT(t, Options{Dir: t.TempDir(), RawAppends: raw, Now: func() time.Time { return now }})
		reserveCalls(t, l, 5, 10)
		res, err := l.Reserve(context.Background(), Reservation{Call: call("lookup", 0, "get_order", `{"order_id":"4712"}`), MaxCalls: 10})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Complete(context.Background(), res, Outcome{OK: true, Latency: time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(l.AuditPath())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Verify(bytes.NewReader(b)); err != nil {
			t.Fatalf("RawAppends %v: %v", raw, err)
		}
		return b
	}
	plain, raw := journal(false), journal(true)
	if len(plain) == 0 || !bytes.Equal(plain, raw) {
		t.Fatalf("journals differ with RawAppends:\n%s\nwithout:\n%s", raw, plain)
	}
}

func TestRawAppendError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path) // read only
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := rawAppend(f, []byte("{}\n"))
	var pe *os.PathError
	if n != 0 || !errors.As(err, &pe) || !errors.Is(err, syscall.EBADF) || pe.Path != path {
		t.Fatalf("rawAppend to a read-only file: %d, %v; want EBADF naming the file", n, err)
	}
}
