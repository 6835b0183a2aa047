package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestLeaseSize(t *testing.T) {
	tests := []struct {
		max, used, want int
	}{
		{1, 0, 0},
		{3, 0, 0},
		{150, 0, 1},     // fewer than 200 left: counted one by one
		{199, 0, 1},     // still one by one
		{200, 0, 2},     // the smallest lease
		{1000, 0, 10},   // 1% of what is left
		{1000, 900, 1},  // near the end of the budget: exact again
		{1000, 1000, 0}, // used up
		{1000, 1200, 0}, // over (an approved hold passed max_calls)
		{25600, 0, 256}, // the cap
		{1_000_000, 0, 256},
		{1_000_000, 999_000, 10},
	}
	for _, tt := range tests {
		if got := leaseSize(tt.max, tt.used); got != tt.want {
			t.Errorf("leaseSize(max %d, used %d) = %d, want %d", tt.max, tt.used, got, tt.want)
		}
	}
}

// leases returns the lease records of a journal.
func leases(recs []parsed) []parsed {
	var out []parsed
	for _, r := range recs {
		if r.Type == typeLease {
			out = append(out, r)
		}
	}
	return out
}

// TestLeaseFewSyncsEachCallWritten: a step with a large budget takes one
// fdatasync per lease record, not per call, and every allow record is in the journal
// file before Reserve returns (so it survives the process).
func TestLeaseFewSyncsEachCallWritten(t *testing.T) {
	l := openT(t, Options{Dir: t.TempDir(), FlushInterval: time.Hour})
	ctx := context.Background()
	before := l.Stats()
	const n = 1000
	for i := 1; i <= n; i++ {
		tk, err := l.Reserve(ctx, Reservation{Call: call("lookup", 0, "get_order", `{"id":`+strconv.Itoa(i)+`}`), MaxCalls: 1_000_000})
		if err != nil {
			t.Fatal(err)
		}
		if tk.Used != i {
			t.Fatalf("call %d got used %d", i, tk.Used)
		}
		if i%97 == 1 { // spot checks: reading the file each time is slow
			data, err := os.ReadFile(l.AuditPath())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(data, []byte(`{"seq":`+strconv.FormatUint(tk.Seq, 10)+`,`)) {
				t.Fatalf("call %d: allow record %d not in the journal when Reserve returned", i, tk.Seq)
			}
		}
		if err := l.Complete(ctx, tk, Outcome{OK: true}); err != nil {
			t.Fatal(err)
		}
	}
	// A lease at call 1, renewed ahead at calls 193, 385, 577, 769 and 961
	// (fewer than 256/4 left), each synced once (the last one's sync may
	// still be under way).
	if got := l.Stats().Syncs - before.Syncs; got > 6 {
		t.Fatalf("%d fdatasyncs for %d calls, want at most 6 (one per lease record)", got, n)
	}
	recs := readRecordsAfterClose(t, l)
	ls := leases(recs)
	var through []int
	for _, r := range ls {
		through = append(through, r.Through)
	}
	// Six lease records, then Close returns what is left of the last one.
	if want := []int{256, 448, 640, 832, 1024, 1216, 1000}; !equalInts(through, want) {
		t.Fatalf("lease records through %v, want %v", through, want)
	}
	if !strings.Contains(ls[6].Note, "216 leased calls returned") {
		t.Fatalf("return record note %q", ls[6].Note)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestLeaseExactCountAcrossCleanRestart: Close returns the unused part of a
// lease, so a clean restart loses no call.
func TestLeaseExactCountAcrossCleanRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	for round, want := range []int{10, 25} {
		l := openT(t, Options{Dir: dir})
		for l.Progress(digest).Calls(0) < want {
			if _, err := l.Reserve(ctx, Reservation{Call: call("lookup", 0, "get_order", ""), MaxCalls: 100_000}); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l2 := openT(t, Options{Dir: dir})
		if got := l2.Progress(digest).Calls(0); got != want {
			t.Fatalf("round %d: %d calls after a clean restart, want %d", round, got, want)
		}
		l2.Close()
	}
}

// crashCopy copies a state directory as a crash of the process would leave
// it: the journal as written so far (the page cache survives the process),
// without the records Close would add. The copy is bound to its own journal.
func crashCopy(t *testing.T, l *Ledger) string {
	t.Helper()
	// Let the writer finish what it took, as the kernel has it after write(2).
	l.mu.Lock()
	pending := len(l.pending)
	l.mu.Unlock()
	if pending != 0 {
		t.Fatalf("records still queued: call crashCopy after Reserve returned")
	}
	return crashCopyQueued(t, l)
}

// crashCopyQueued is crashCopy with records still queued: they are lost,
// as the process's memory is.
func crashCopyQueued(t *testing.T, l *Ledger) string {
	t.Helper()
	dir := t.TempDir()
	// The anchor as the crash leaves it, read before the journal (which is
	// never shorter).
	anchor, err := os.ReadFile(filepath.Join(l.Dir(), anchorName))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, anchorName), anchor, 0o600); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(l.AuditPath())
	if err != nil {
		t.Fatal(err)
	}
	audit := filepath.Join(dir, auditName)
	if err := os.WriteFile(audit, data, 0o600); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(binding{Audit: audit})
	if err := os.WriteFile(filepath.Join(dir, bindingName), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestLeaseCountedAfterCrash: after a crash the whole open lease counts as
// used, with a record that says why; no call is granted twice.
func TestLeaseCountedAfterCrash(t *testing.T) {
	l := openT(t, Options{Dir: t.TempDir()})
	ctx := context.Background()
	for range 8 {
		if _, err := l.Reserve(ctx, Reservation{Call: call("lookup", 0, "get_order", ""), MaxCalls: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	// Calls 1-8 used the first lease (1% of 1000: through 10) but for 2,
	// too few for a renewal ahead (fewer than 10/4 left).
	dir := crashCopy(t, l)

	l2 := openT(t, Options{Dir: dir})
	if got := l2.Progress(digest).Calls(0); got != 10 {
		t.Fatalf("%d calls after a crash inside a lease through 10, want 10 (the lease counts as used)", got)
	}
	// One more call opens a lease of 9 (1% of 990); crash after it.
	if _, err := l2.Reserve(ctx, Reservation{Call: call("lookup", 0, "get_order", ""), MaxCalls: 1000}); err != nil {
		t.Fatal(err)
	}
	dir2 := crashCopy(t, l2)
	l3 := openT(t, Options{Dir: dir2})
	if got := l3.Progress(digest).Calls(0); got != 19 {
		t.Fatalf("%d calls after a crash inside a lease through 19, want 19 (the lease counts as used)", got)
	}
	recs := readRecordsAfterClose(t, l3)
	last := leases(recs)
	settled := last[len(last)-1]
	if settled.Used != 19 || settled.Through != 19 || settled.Step != "lookup" || !strings.Contains(settled.Note, "the 8 calls leased but not recorded count as used") {
		t.Fatalf("settling record %+v", settled.record)
	}
	// The count stays settled on the next open (the record replays).
	l4 := openT(t, Options{Dir: dir2})
	if got := l4.Progress(digest).Calls(0); got != 19 {
		t.Fatalf("%d calls on the open after settling, want 19", got)
	}
}

// TestLeaseConcurrentExact: 16 goroutines against a budget taken in leases
// get exactly max_calls, and the count survives a restart.
func TestLeaseConcurrentExact(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir})
	const max = 1000
	var granted atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, err := l.Reserve(context.Background(), Reservation{Call: call("lookup", 0, "get_order", ""), MaxCalls: max})
				if err == nil {
					granted.Add(1)
				} else if !errors.Is(err, ErrExhausted) {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if granted.Load() != max || l.Progress(digest).Calls(0) != max {
		t.Fatalf("granted %d, counted %d, want exactly %d", granted.Load(), l.Progress(digest).Calls(0), max)
	}
	recs := readRecordsAfterClose(t, l)
	if len(leases(recs)) == 0 {
		t.Fatal("no lease taken for a budget of 1000")
	}
	allows := 0
	for _, r := range recs {
		if r.Type == typeDecision && r.Decision == DecisionAllow {
			allows++
		}
		if r.Type == typeLease && r.Through > max {
			t.Fatalf("a lease through %d beyond max_calls %d", r.Through, max)
		}
	}
	if allows != max {
		t.Fatalf("%d allow records, want %d", allows, max)
	}
	l2 := openT(t, Options{Dir: dir})
	if got := l2.Progress(digest).Calls(0); got != max {
		t.Fatalf("%d calls after restart, want %d", got, max)
	}
}

// TestNoLease: a small budget, SyncEachCall and hold consumption are each
// counted alone, one fdatasync per call.
func TestNoLease(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		max  int
	}{
		{"small budget", Options{}, 150},
		{"sync each call", Options{SyncEachCall: true}, 1_000_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.Dir, tt.o.FlushInterval = t.TempDir(), time.Hour
			l := openT(t, tt.o)
			before := l.Stats()
			for range 20 {
				if _, err := l.Reserve(context.Background(), Reservation{Call: call("refund", 1, "refund_customer", ""), MaxCalls: tt.max}); err != nil {
					t.Fatal(err)
				}
			}
			if got := l.Stats().Syncs - before.Syncs; got != 20 {
				t.Fatalf("%d fdatasyncs for 20 calls, want 20", got)
			}
			if ls := leases(readRecordsAfterClose(t, l)); len(ls) != 0 {
				t.Fatalf("lease records %+v", ls)
			}
		})
	}
}

// TestFlushTimerUnderSteadyTraffic: records that do not wait for disk are
// synced within FlushInterval even when new ones keep coming.
func TestFlushTimerUnderSteadyTraffic(t *testing.T) {
	l := openT(t, Options{Dir: t.TempDir(), FlushInterval: 20 * time.Millisecond})
	ctx := context.Background()
	before := l.Stats()
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		if err := l.Block(ctx, call("a", 0, "t", ""), "blocked"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	// 300ms of steady blocks with a 20ms interval: about 15 syncs. Only a
	// timer postponed by every record would give none.
	if got := l.Stats().Syncs - before.Syncs; got < 3 {
		t.Fatalf("%d fdatasyncs in 300ms of steady traffic with a 20ms flush interval", got)
	}
}

// WaitsForDisk says ahead which reservations wait for an fdatasync.
func TestWaitsForDisk(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		o    Options
		max  int
		want []bool // before each of the first calls
	}{
		{"leases", Options{}, 1_000_000, []bool{true, false, false}},
		{"few calls left", Options{}, 3, []bool{true, true, true}},
		{"sync each call", Options{SyncEachCall: true}, 1_000_000, []bool{true, true, true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.o
			o.Dir = t.TempDir()
			l := openT(t, o)
			rv := Reservation{Call: Call{PlanDigest: "sha256:p", Step: "s", Tool: "t", Args: []byte(`{}`)}, MaxCalls: tt.max}
			for n, want := range tt.want {
				if got := l.WaitsForDisk(rv); got != want {
					t.Fatalf("before call %d: WaitsForDisk %v, want %v", n+1, got, want)
				}
				before := l.Stats().Syncs
				if _, err := l.Reserve(ctx, rv); err != nil {
					t.Fatal(err)
				}
				if synced := l.Stats().Syncs > before; synced != want {
					t.Fatalf("call %d: synced %v, but WaitsForDisk said %v", n+1, synced, want)
				}
			}
		})
	}
}
