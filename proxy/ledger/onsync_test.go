package ledger

import (
	"context"
	"sync"
	"testing"
	"time"
)

// OnSync hears of every fdatasync of the journal the writer counts, each
// with a duration, and a ledger without it works as before.
func TestOnSync(t *testing.T) {
	var (
		mu    sync.Mutex
		calls []time.Duration
	)
	l := openT(t, Options{Dir: t.TempDir(), SyncEachCall: true, OnSync: func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, d)
	}})
	ctx := context.Background()
	for range 3 {
		if _, err := l.Reserve(ctx, Reservation{Call: call("lookup", 0, "get_order", `{"order_id":"4711"}`), MaxCalls: 10}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := int(l.Stats().Syncs); len(calls) != want || want < 3 {
		t.Fatalf("OnSync called %d times, Stats().Syncs = %d (want equal, at least one per durable call)", len(calls), want)
	}
	for i, d := range calls {
		if d < 0 {
			t.Errorf("call %d: negative duration %v", i, d)
		}
	}
}
