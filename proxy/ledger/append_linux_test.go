package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/planlock/planlock/internal/datasync"
)

// RawAppends changes how records reach the file and how a caller's own
// sync is made, not what is written: the same calls on the same clock give
// the same journal, which verifies, with as many syncs.
func TestRawAppendsWriteTheSameJournal(t *testing.T) {
	for _, syncEach := range []bool{false, true} {
		t.Run(fmt.Sprintf("SyncEachCall=%v", syncEach), func(t *testing.T) {
			journal := func(raw bool) ([]byte, Stats) {
				t.Helper()
				now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
				l := openT(t, Options{Dir: t.TempDir(), RawAppends: raw, SyncEachCall: syncEach, FlushInterval: time.Hour,
					Now: func() time.Time { return now }})
				reserveCalls(t, l, 5, 10)
				res, err := l.Reserve(context.Background(), Reservation{Call: call("lookup", 0, "get_order", `{"order_id":"4712"}`), MaxCalls: 10})
				if err != nil {
					t.Fatal(err)
				}
				if err := l.Complete(context.Background(), res, Outcome{OK: true, Latency: time.Millisecond}); err != nil {
					t.Fatal(err)
				}
				st := l.Stats()
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
				head, err := ReadHead(Options{Dir: filepath.Dir(l.AuditPath())})
				if err != nil || head.Seq == 0 {
					t.Fatalf("RawAppends %v: anchor %v, %v", raw, head, err)
				}
				return b, st
			}
			plain, plainSt := journal(false)
			raw, rawSt := journal(true)
			if len(plain) == 0 || !bytes.Equal(plain, raw) {
				t.Fatalf("journals differ with RawAppends:\n%s\nwithout:\n%s", raw, plain)
			}
			if rawSt.Syncs != plainSt.Syncs || rawSt.AnchorWrites != plainSt.AnchorWrites {
				t.Fatalf("RawAppends made %d syncs and %d anchor writes, without %d and %d", rawSt.Syncs, rawSt.AnchorWrites, plainSt.Syncs, plainSt.AnchorWrites)
			}
			if syncEach && rawSt.Syncs < 6 {
				t.Fatalf("%d syncs for 6 calls with SyncEachCall", rawSt.Syncs)
			}
		})
	}
}

// Under RawAppends a caller that runs the sync its record waits for makes
// it a raw system call; the syncer goroutine (here the flush timer's sync
// of an outcome) does not, and without RawAppends nobody does.
func TestRawSyncOnlyForTheCallersOwn(t *testing.T) {
	for _, rawAppends := range []bool{false, true} {
		t.Run(fmt.Sprintf("RawAppends=%v", rawAppends), func(t *testing.T) {
			l := openT(t, Options{Dir: t.TempDir(), RawAppends: rawAppends, SyncEachCall: true, FlushInterval: 5 * time.Millisecond})
			var mu sync.Mutex
			var raws []bool
			synced := make(chan struct{}, 16)
			l.wmu.Lock()
			l.setSyncHook(func(f *os.File, _ uint64, raw bool) error {
				mu.Lock()
				raws = append(raws, raw)
				mu.Unlock()
				synced <- struct{}{}
				return datasync.Sync(f)
			})
			l.wmu.Unlock()
			ctx := context.Background()
			res, err := l.Reserve(ctx, Reservation{Call: benchCall, MaxCalls: 5})
			if err != nil {
				t.Fatal(err)
			}
			<-synced
			if err := l.Complete(ctx, res, Outcome{OK: true}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-synced: // the flush timer's
			case <-time.After(10 * time.Second):
				t.Fatal("the outcome was not synced by the flush timer")
			}
			mu.Lock()
			defer mu.Unlock()
			if want := []bool{rawAppends, false}; !slices.Equal(raws, want) {
				t.Fatalf("syncs raw %v, want %v (the caller's, the timer's)", raws, want)
			}
		})
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
