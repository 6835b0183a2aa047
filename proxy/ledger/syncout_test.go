package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/planlock/planlock/internal/datasync"
)

// syncGate replaces the journal's group-commit fdatasync (syncHook): it can
// hold syncs until released, make them fail, and records each sync that
// returned with the journal's size when it started (what it made durable at
// least).
type syncGate struct {
	mu          sync.Mutex
	block       bool // syncs from now on wait for release
	entered     chan uint64
	release     chan struct{}
	opened      bool
	fail        error // syncs from now on fail with it
	inflight    int
	maxInflight int
	done        []syncedAt
}

type syncedAt struct {
	seq  uint64
	size int64
}

func gateSyncs(t *testing.T, l *Ledger) *syncGate {
	g := &syncGate{entered: make(chan uint64, 16), release: make(chan struct{})}
	t.Cleanup(g.open) // before the ledger's Close, also when the test failed
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.setSyncHook(g.hook)
	return g
}

// setSyncHook installs the hook under mu too: a sync runs outside wmu and
// reads it after taking mu.
func (l *Ledger) setSyncHook(h func(*os.File, uint64, bool) error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.syncHook = h
}

func (g *syncGate) set(block bool, fail error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.block, g.fail = block, fail
}

// open lets the held syncs go on, and the later ones not wait.
func (g *syncGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.block = false
	if !g.opened {
		g.opened = true
		close(g.release)
	}
}

func (g *syncGate) hook(f *os.File, seq uint64, _ bool) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.inflight++
	g.maxInflight = max(g.maxInflight, g.inflight)
	block, fail := g.block, g.fail
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.inflight--
	}()
	if block {
		g.entered <- seq
		<-g.release
	}
	if fail != nil {
		return fail
	}
	if err := datasync.Sync(f); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.done = append(g.done, syncedAt{seq: seq, size: fi.Size()})
	return nil
}

// most is the most fdatasyncs of the journal that ran at once; the flush
// timer's may still be running, so it is read under the lock.
func (g *syncGate) most() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.maxInflight
}

// durable is what the syncs that returned made durable at least.
func (g *syncGate) durable() syncedAt {
	g.mu.Lock()
	defer g.mu.Unlock()
	var d syncedAt
	for _, s := range g.done {
		if s.seq > d.seq {
			d.seq = s.seq
		}
		d.size = max(d.size, s.size)
	}
	return d
}

func lastSeq(l *Ledger) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq
}

// within fails the test when fn has not returned after a long while: a
// guard against a hang, not a timing.
func within(t *testing.T, what string, fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not return while an fdatasync was in progress: it waits for a disk flush it does not need", what)
	}
}

// An fdatasync in progress (the flush timer's, or a durable call's) does
// not hold the journal: a record that needs no sync of its own is written
// by its caller at once, and a call inside a durable lease goes on, while
// the sync is still under way.
func TestRecordWrittenDuringSync(t *testing.T) {
	lookup := Reservation{Call: call("lookup", 0, "get_order", `{"order_id":"4711"}`), MaxCalls: math.MaxInt32}
	for _, tc := range []struct {
		name string
		o    Options
		// start makes a sync start (and block) on another goroutine.
		start func(t *testing.T, l *Ledger) <-chan error
	}{
		{name: "flush timer", o: Options{FlushInterval: 2 * time.Millisecond},
			start: func(t *testing.T, l *Ledger) <-chan error {
				// An outcome is written unsynced; the timer syncs it.
				if err := l.Block(context.Background(), benchCall, "unsynced"); err != nil {
					t.Fatal(err)
				}
				return nil
			}},
		{name: "durable call", o: Options{FlushInterval: time.Hour},
			start: func(t *testing.T, l *Ledger) <-chan error {
				done := make(chan error, 1)
				go func() {
					_, err := l.Reserve(context.Background(), Reservation{Call: benchCall, MaxCalls: 5})
					done <- err
				}()
				return done
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.Dir = t.TempDir()
			l := openT(t, o)
			ctx := context.Background()
			g := gateSyncs(t, l)
			// A durable lease first, so that the calls below need no sync.
			if _, err := l.Reserve(ctx, lookup); err != nil {
				t.Fatal(err)
			}
			g.set(true, nil)
			other := tc.start(t, l)
			syncing := <-g.entered

			if err := l.Block(ctx, benchCall, "while syncing"); err != nil {
				t.Fatal(err)
			}
			if seq := lastSeq(l); !journalHas(t, l, seq, typeDecision) {
				t.Fatalf("record %d is not in the journal while the fdatasync through %d is in progress: its write waited for the sync", seq, syncing)
			}
			var tk Ticket
			within(t, "Reserve inside a durable lease", func() (err error) {
				tk, err = l.Reserve(ctx, lookup)
				return err
			})
			if !journalHas(t, l, tk.Seq, typeDecision) {
				t.Fatalf("Reserve returned before its allow record %d was written", tk.Seq)
			}
			g.open()
			if other != nil {
				if err := <-other; err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// A durable record written while an fdatasync is in progress is not
// acknowledged by that sync (it may have started before the write): only by
// a sync that began after it was written. Never two syncs at once.
func TestDurableAckedAfterCoveringSync(t *testing.T) {
	l := openT(t, Options{Dir: t.TempDir(), SyncEachCall: true, FlushInterval: time.Hour})
	g := gateSyncs(t, l)
	g.set(true, nil)
	ctx := context.Background()
	type result struct {
		tk  Ticket
		err error
	}
	first, second := make(chan result, 1), make(chan result, 1)
	go func() {
		tk, err := l.Reserve(ctx, Reservation{Call: benchCall, MaxCalls: 5})
		first <- result{tk, err}
	}()
	syncing := <-g.entered
	go func() {
		tk, err := l.Reserve(ctx, Reservation{Call: benchCall, MaxCalls: 5})
		second <- result{tk, err}
	}()
	// The second allow record gets written while the first sync is held.
	for deadline := time.Now().Add(30 * time.Second); lastSeq(l) <= syncing || !journalHas(t, l, syncing+1, typeDecision); {
		if time.Now().After(deadline) {
			t.Fatal("the second record was never written while the first sync was held")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case r := <-second:
		t.Fatalf("the second Reserve returned (%+v) while the only sync that started was the one through %d", r, syncing)
	default:
	}
	if h, err := ReadHead(Options{Dir: l.Dir()}); err != nil || h.Seq >= syncing {
		t.Fatalf("anchor %v (%v) while the sync through %d is held: it names a record not yet durable", h, err, syncing)
	}
	g.open()
	for i, ch := range []chan result{first, second} {
		r := <-ch
		if r.err != nil {
			t.Fatal(r.err)
		}
		if d := g.durable(); d.seq < r.tk.Seq {
			t.Fatalf("Reserve %d returned with record %d, but the syncs that returned cover only through %d", i+1, r.tk.Seq, d.seq)
		}
	}
	if n := g.most(); n != 1 {
		t.Fatalf("%d fdatasyncs of the journal at once, want 1", n)
	}
}

// powerLossCopy copies a state directory as a machine crash could leave it
// at worst: the anchor as last written (its unsynced write survived) and
// the journal cut where the last fdatasync that returned left it durable.
// acked is read first: every Reserve that returned before must still count.
func powerLossCopy(t *testing.T, l *Ledger, g *syncGate) string {
	t.Helper()
	anchor, err := os.ReadFile(filepath.Join(l.Dir(), anchorName))
	if err != nil {
		t.Fatal(err)
	}
	d := g.durable()
	data, err := os.ReadFile(l.AuditPath())
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(data)) < d.size {
		t.Fatalf("journal of %d bytes, but %d were synced", len(data), d.size)
	}
	dir := t.TempDir()
	audit := filepath.Join(dir, auditName)
	b, _ := json.Marshal(binding{Audit: audit})
	for name, content := range map[string][]byte{anchorName: anchor, auditName: data[:d.size], bindingName: b} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Under concurrent traffic with syncs outside the journal's lock, a state
// directory cut as a power loss leaves it (journal up to the last sync that
// returned, anchor as last written) always opens: the anchor never names a
// record that was not durable; and every Reserve acknowledged before the
// cut still counts.
func TestAnchorNeverAheadOfDurable(t *testing.T) {
	l := openT(t, Options{Dir: t.TempDir(), FlushInterval: time.Millisecond})
	g := gateSyncs(t, l)
	ctx := context.Background()
	const steps = 4
	var acked [steps]atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 150 {
				step := (w + n) % steps
				// Steps 0 and 1 in leases, 2 and 3 one sync a call.
				max := 300
				if step < 2 {
					max = 1_000_000
				}
				c := call("s"+strconv.Itoa(step), step, "t", `{}`)
				tk, err := l.Reserve(ctx, Reservation{Call: c, MaxCalls: max})
				if errors.Is(err, ErrExhausted) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				acked[step].Add(1)
				if err := l.Complete(ctx, tk, Outcome{OK: true}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		close(finished)
	}()
	for cuts := 0; ; cuts++ {
		var want [steps]int64
		for i := range want {
			want[i] = acked[i].Load()
		}
		dir := powerLossCopy(t, l, g)
		l2, err := Open(ctx, Options{Dir: dir})
		if err != nil {
			t.Errorf("cut %d: a state cut at the last fdatasync does not open: %v", cuts, err)
			wg.Wait() // the workers use the test's t
			return
		}
		p := l2.Progress(digest)
		for i := range want {
			if got := p.Calls(i); int64(got) < want[i] {
				t.Errorf("cut %d: step %d: %d calls after a power loss, but %d Reserves had returned", cuts, i, got, want[i])
			}
		}
		l2.Close()
		select {
		case <-finished:
			if cuts < 5 {
				t.Logf("only %d cuts during the traffic", cuts)
			}
			if n := g.most(); n != 1 {
				t.Fatalf("%d fdatasyncs of the journal at once, want 1", n)
			}
			return
		default:
		}
	}
}

// The anchor only moves forward: a head older than the one written is
// ignored, so syncs that finish out of order cannot move it back.
func TestAnchorOnlyMovesForward(t *testing.T) {
	dir := t.TempDir()
	mk := func(seq uint64) Head {
		s := strconv.FormatUint(seq, 16)
		for len(s) < 64 {
			s = "0" + s
		}
		return Head{Seq: seq, Hash: s}
	}
	if err := createAnchor(dir, mk(1)); err != nil {
		t.Fatal(err)
	}
	a, err := openAnchor(dir, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	for _, seq := range []uint64{5, 3, 4} {
		if err := a.write(mk(seq)); err != nil {
			t.Fatal(err)
		}
		if err := a.sync(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadHead(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got != mk(5) {
		t.Fatalf("anchor %v after writes of 5, 3, 4: want seq 5", got)
	}
}

// A failed fdatasync outside the journal's lock fails the ledger closed as
// one under it did: the call waiting for it is refused, and so is every
// later record, none of which is written.
func TestFailedSyncFailsClosed(t *testing.T) {
	eio := errors.New("input/output error")
	t.Run("durable call", func(t *testing.T) {
		l := openT(t, Options{Dir: t.TempDir(), SyncEachCall: true, FlushInterval: time.Hour})
		g := gateSyncs(t, l)
		ctx := context.Background()
		if _, err := l.Reserve(ctx, Reservation{Call: benchCall, MaxCalls: 5}); err != nil {
			t.Fatal(err)
		}
		g.set(false, eio)
		if _, err := l.Reserve(ctx, Reservation{Call: benchCall, MaxCalls: 5}); !errors.Is(err, ErrFailed) {
			t.Fatalf("Reserve whose sync failed: %v, want ErrFailed", err)
		}
		failedClosed(t, l)
	})
	t.Run("flush timer", func(t *testing.T) {
		l := openT(t, Options{Dir: t.TempDir(), FlushInterval: time.Millisecond})
		g := gateSyncs(t, l)
		g.set(false, eio)
		if err := l.Block(context.Background(), benchCall, "unsynced"); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); l.failure() == nil; {
			if time.Now().After(deadline) {
				t.Fatal("the flush's failed fdatasync did not fail the ledger")
			}
			time.Sleep(time.Millisecond)
		}
		failedClosed(t, l)
	})
}

func failedClosed(t *testing.T, l *Ledger) {
	t.Helper()
	ctx := context.Background()
	before := lastSeq(l)
	if _, err := l.Reserve(ctx, Reservation{Call: benchCall, MaxCalls: 5}); !errors.Is(err, ErrFailed) {
		t.Fatalf("Reserve after a failed sync: %v, want ErrFailed", err)
	}
	if err := l.Block(ctx, benchCall, "after"); !errors.Is(err, ErrFailed) {
		t.Fatalf("Block after a failed sync: %v, want ErrFailed", err)
	}
	if err := l.Close(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Close after a failed sync: %v, want ErrFailed", err)
	}
	for _, r := range readRecords(t, l.AuditPath()) {
		if r.Seq > before {
			t.Fatalf("record %d (%s) written after the failed sync", r.Seq, r.Type)
		}
	}
}

// Close while an fdatasync is in flight waits for it, syncs what is left,
// and leaves the anchor at the journal's end.
func TestCloseWhileSyncInFlight(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir, FlushInterval: time.Millisecond})
	g := gateSyncs(t, l)
	ctx := context.Background()
	lookup := Reservation{Call: call("lookup", 0, "get_order", `{}`), MaxCalls: 1_000_000}
	for range 3 {
		if _, err := l.Reserve(ctx, lookup); err != nil {
			t.Fatal(err)
		}
	}
	g.set(true, nil)
	if err := l.Block(ctx, benchCall, "unsynced"); err != nil {
		t.Fatal(err)
	}
	<-g.entered
	var released atomic.Bool
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while an fdatasync was in flight", err)
	case <-time.After(20 * time.Millisecond):
	}
	g.set(false, nil)
	released.Store(true)
	g.open()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if !released.Load() {
		t.Fatal("Close returned before the sync in flight")
	}
	f, err := os.Open(l.AuditPath())
	if err != nil {
		t.Fatal(err)
	}
	res, err := Verify(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	h, err := ReadHead(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if h != (Head{Seq: uint64(res.Records), Hash: res.Head}) {
		t.Fatalf("anchor %v after Close, want the journal's end seq=%d hash=%s", h, res.Records, res.Head)
	}
	l2 := openT(t, Options{Dir: dir})
	if got := l2.Progress(digest).Calls(0); got != 3 {
		t.Fatalf("%d calls after a clean restart, want 3", got)
	}
}

// A lease is renewed ahead, once fewer than a quarter of it is left: the
// call that renews it and the calls still inside the old lease do not wait
// for the new lease record's fdatasync; a call past the old lease does. A
// power loss before that sync leaves the old lease, which bounds the count.
func TestLeaseRenewedAhead(t *testing.T) {
	l := openT(t, Options{Dir: t.TempDir(), FlushInterval: time.Hour})
	g := gateSyncs(t, l)
	ctx := context.Background()
	rv := Reservation{Call: call("lookup", 0, "get_order", `{}`), MaxCalls: 1000}
	for range 8 { // the lease of 10 (1% of 1000), durable
		if _, err := l.Reserve(ctx, rv); err != nil {
			t.Fatal(err)
		}
	}
	g.set(true, nil)
	var renewing Ticket
	within(t, "the call that renews the lease", func() (err error) {
		renewing, err = l.Reserve(ctx, rv) // call 9: 1 left of 10, renewed through 8+9
		return err
	})
	if syncing := <-g.entered; syncing < renewing.Seq-1 {
		t.Fatalf("the sync under way is through %d, not the renewal record %d", syncing, renewing.Seq-1)
	}
	if l.WaitsForDisk(rv) {
		t.Fatal("WaitsForDisk: call 10 is inside the durable lease")
	}
	within(t, "a call inside the old lease", func() error {
		_, err := l.Reserve(ctx, rv)
		return err
	})
	if !l.WaitsForDisk(rv) {
		t.Fatal("WaitsForDisk: call 11 needs the renewed lease, whose sync is held")
	}
	// A power loss now: the renewal was not durable; the old lease counts.
	l2, err := Open(ctx, Options{Dir: powerLossCopy(t, l, g)})
	if err != nil {
		t.Fatal(err)
	}
	if got := l2.Progress(digest).Calls(0); got != 10 {
		t.Fatalf("%d calls after a power loss before the renewal was durable, want 10 (the old lease)", got)
	}
	l2.Close()

	past := make(chan error, 1)
	go func() {
		_, err := l.Reserve(ctx, rv)
		past <- err
	}()
	g.open()
	if err := <-past; err != nil {
		t.Fatal(err)
	}
	if d := g.durable(); d.seq < renewing.Seq-1 {
		t.Fatalf("call 11 returned before the renewed lease (record %d) was durable (synced through %d)", renewing.Seq-1, d.seq)
	}
	recs := readRecordsAfterClose(t, l)
	var through []int
	for _, r := range leases(recs) {
		through = append(through, r.Through)
	}
	if want := []int{10, 17, 11}; !equalInts(through, want) {
		t.Fatalf("lease records through %v, want %v (renewed through 17, returned at 11)", through, want)
	}
}
