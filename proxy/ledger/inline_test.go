package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// turnLog records who ran the writer's turns that wrote records.
type turnLog struct {
	mu      sync.Mutex
	inline  int // turns run by a caller
	writer  int // turns run by the writer goroutine
	records int
}

func (g *turnLog) add(inline bool, records int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if inline {
		g.inline++
	} else {
		g.writer++
	}
	g.records += records
}

func (g *turnLog) get() (inline, writer, records int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inline, g.writer, g.records
}

// watchTurns installs the turn hook (under wmu, as the turns read it).
func watchTurns(l *Ledger) *turnLog {
	g := &turnLog{}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.turnHook = g.add
	return g
}

// journalHas reports whether the journal file holds the record seq now.
func journalHas(t *testing.T, l *Ledger, seq uint64, typ string) bool {
	t.Helper()
	for _, r := range readRecords(t, l.AuditPath()) {
		if r.Seq == seq {
			if r.Type != typ {
				t.Fatalf("record %d is a %s, want %s", seq, r.Type, typ)
			}
			return true
		}
	}
	return false
}

// With no concurrent caller, every record is written by its caller's own
// goroutine: the record is in the file when the method returns, and the
// writer goroutine ran no turn (no goroutine hand-off per call).
func TestRecordsWrittenInlineWhenJournalFree(t *testing.T) {
	for _, m := range reserveModes {
		t.Run(m.name, func(t *testing.T) {
			o := m.o
			o.Dir, o.FlushInterval = t.TempDir(), time.Hour
			l := openT(t, o)
			turns := watchTurns(l)
			ctx := context.Background()
			before := l.Stats()
			for i := range 3 {
				tk, err := l.Reserve(ctx, Reservation{Call: benchCall, MaxCalls: math.MaxInt})
				if err != nil {
					t.Fatal(err)
				}
				if !journalHas(t, l, tk.Seq, typeDecision) {
					t.Fatalf("call %d: Reserve returned before its allow record %d was written", i, tk.Seq)
				}
				if err := l.Complete(ctx, tk, Outcome{OK: true}); err != nil {
					t.Fatal(err)
				}
				if !journalHas(t, l, tk.Seq+1, typeOutcome) {
					t.Fatalf("call %d: Complete returned before its outcome record was written", i)
				}
			}
			if err := l.Block(ctx, benchCall, "not in the plan"); err != nil {
				t.Fatal(err)
			}
			st := l.Stats()
			if !journalHas(t, l, st.Records, typeDecision) {
				t.Fatal("Block returned before its record was written")
			}
			inline, writer, records := turns.get()
			if writer != 0 || inline == 0 {
				t.Fatalf("turns: %d inline, %d by the writer goroutine; want all inline", inline, writer)
			}
			if got := st.Records - before.Records; uint64(records) != got {
				t.Fatalf("turns wrote %d records, Stats counts %d", records, got)
			}
			if m.o.SyncEachCall && st.Syncs-before.Syncs < 3 {
				t.Fatalf("%d fdatasyncs for 3 durable reservations", st.Syncs-before.Syncs)
			}
		})
	}
}

// While a turn holds the journal, a caller does not wait for the lock: it
// hands its record to the writer goroutine, which writes it once the
// journal is free.
func TestBusyJournalHandsOffToWriter(t *testing.T) {
	l := openT(t, Options{Dir: t.TempDir(), FlushInterval: time.Hour, SyncEachCall: true})
	turns := watchTurns(l)
	ctx := context.Background()
	l.wmu.Lock() // a turn in progress
	done := make(chan error, 1)
	go func() {
		_, err := l.Reserve(ctx, Reservation{Call: benchCall, MaxCalls: 10})
		done <- err
	}()
	// The Reserve cannot finish while the journal is held: its record is
	// queued and the writer goroutine is kicked (and waits for wmu).
	for {
		l.mu.Lock()
		n := len(l.pending)
		l.mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	l.wmu.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, writer, _ := turns.get(); writer != 1 {
		t.Fatalf("the writer goroutine ran %d turns with records, want 1", writer)
	}
}

// Records written inline that need no sync of their own are synced by the
// flush timer, with the anchor, as those the writer goroutine wrote.
func TestInlineRecordsSyncedByTimer(t *testing.T) {
	l := openT(t, Options{Dir: t.TempDir(), FlushInterval: 5 * time.Millisecond})
	if err := l.Block(context.Background(), benchCall, "no"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := l.Stats()
		if st.Syncs >= 1 && st.AnchorSyncs >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no flush after an inline write: %+v", st)
		}
		time.Sleep(time.Millisecond)
	}
}

// Many goroutines mixing durable and non-durable records, with checkpoints
// and rotations on the way and a Close in the middle of the traffic: every
// acknowledged record is in the journal once, in seq order, and the files
// verify as one chain; the counts survive a reopen.
func TestConcurrentInlineAndWriterWithClose(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir, RotateSize: 64 << 10, FlushInterval: time.Millisecond})
	func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.checkpointEvery = 50
	}()
	turns := watchTurns(l)
	ctx := context.Background()
	const workers, each = 16, 120
	var (
		mu       sync.Mutex
		tickets  []Ticket
		outcomes int
		blocks   int
		holds    []string
	)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range each {
				// Step 0 is counted in leases, step 1 (150 calls) one by one,
				// with an fdatasync each.
				step, max := 0, math.MaxInt
				if (w+i)%3 == 0 {
					step, max = 1, 150
				}
				c := call(fmt.Sprint("s", step), step, "t", fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))
				tk, err := l.Reserve(ctx, Reservation{Call: c, MaxCalls: max})
				var ex *ExhaustedError
				switch {
				case errors.Is(err, ErrClosed) || errors.As(err, &ex):
				case err != nil:
					t.Errorf("reserve: %v", err)
					return
				default:
					mu.Lock()
					tickets = append(tickets, tk)
					mu.Unlock()
					if err := l.Complete(ctx, tk, Outcome{OK: i%2 == 0, Err: "boom"}); err == nil {
						mu.Lock()
						outcomes++
						mu.Unlock()
					} else if !errors.Is(err, ErrClosed) {
						t.Errorf("complete: %v", err)
					}
				}
				switch i % 10 {
				case 3:
					if err := l.Block(ctx, c, "blocked"); err == nil {
						mu.Lock()
						blocks++
						mu.Unlock()
					} else if !errors.Is(err, ErrClosed) {
						t.Errorf("block: %v", err)
					}
				case 7:
					h, err := l.NewHold(ctx, call("s2", 2, "t", fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)), HoldSpec{Reason: "r", Expires: time.Now().Add(time.Hour)})
					if err == nil {
						mu.Lock()
						holds = append(holds, h.ID)
						mu.Unlock()
					} else if !errors.Is(err, ErrClosed) {
						t.Errorf("hold: %v", err)
					}
				}
			}
		}()
	}
	close(start)
	// Close while the traffic runs: about half of it is refused.
	for {
		mu.Lock()
		n := len(tickets)
		mu.Unlock()
		if n >= workers*each/2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	inline, writer, _ := turns.get()
	t.Logf("%d tickets; turns: %d inline, %d by the writer goroutine; %+v", len(tickets), inline, writer, l.Stats())
	if inline == 0 {
		t.Error("no turn ran inline")
	}
	st := l.Stats()
	if st.Rotations == 0 {
		t.Error("no rotation: the test did not exercise rotation under load")
	}

	files := seriesOf(t, l.AuditPath())
	byseq := map[uint64]*parsed{}
	var last uint64
	var gotOutcomes, gotBlocks, checkpoints int
	gotHolds := map[string]bool{}
	if _, _, err := walkSeries(openFiles(t, files), nil, func(r *parsed) error {
		if r.Seq <= last {
			return fmt.Errorf("seq %d after %d", r.Seq, last)
		}
		last = r.Seq
		cp := *r
		byseq[r.Seq] = &cp
		switch {
		case r.Type == typeOutcome:
			gotOutcomes++
		case r.Type == typeDecision && r.Decision == DecisionBlock:
			gotBlocks++
		case r.Type == typeDecision && r.Decision == DecisionHold:
			gotHolds[r.Hold] = true
		case r.Type == typeCheckpoint:
			checkpoints++
		}
		return nil
	}, false); err != nil {
		t.Fatalf("journal series %v: %v", files, err)
	}
	if checkpoints == 0 {
		t.Error("no checkpoint record: the test did not exercise checkpoints under load")
	}
	for _, tk := range tickets {
		r := byseq[tk.Seq]
		if r == nil {
			t.Fatalf("ticket seq %d: no record in the journal", tk.Seq)
		}
		if r.Type != typeDecision || r.Decision != DecisionAllow || r.Step != tk.Step || r.Used != tk.Used {
			t.Fatalf("ticket %+v: record %+v", tk, r.record)
		}
	}
	if gotOutcomes != outcomes || gotBlocks != blocks {
		t.Fatalf("journal has %d outcomes and %d blocks, %d and %d were acknowledged", gotOutcomes, gotBlocks, outcomes, blocks)
	}
	for _, id := range holds {
		if !gotHolds[id] {
			t.Fatalf("hold %s acknowledged but not in the journal", id)
		}
	}

	l2 := openT(t, Options{Dir: dir})
	want := map[int]int{}
	for _, tk := range tickets {
		want[tk.StepIndex]++
	}
	for s, n := range want {
		if got := l2.Progress(digest).Calls(s); got != n {
			t.Fatalf("step %d: %d calls after reopen, %d tickets", s, got, n)
		}
	}
}

// A checkpoint due after a caller's turn is written by the writer goroutine
// before any later record: sequential reservations, each written inline,
// still leave checkpoints in the journal that a reopen trusts.
func TestInlineTurnLeavesCheckpointToWriter(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir, SyncEachCall: true, FlushInterval: time.Hour})
	func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.checkpointEvery = 5
	}()
	turns := watchTurns(l)
	for i := range 40 {
		if _, err := l.Reserve(context.Background(), Reservation{Call: benchCall, MaxCalls: 1000}); err != nil {
			t.Fatalf("reserve %d: %v", i, err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	checkpoints := 0
	var last uint64
	for _, r := range readRecords(t, l.AuditPath()) {
		if r.Type == typeCheckpoint {
			checkpoints++
			last = r.Seq
		}
	}
	if inline, _, _ := turns.get(); inline == 0 || checkpoints < 3 {
		t.Fatalf("%d inline turns, %d checkpoint records; want both", inline, checkpoints)
	}
	// The newest checkpoint.json is the last checkpoint record's, and
	// Open accepts it (it fails on a checkpoint that does not match).
	data, err := os.ReadFile(filepath.Join(dir, checkpointName))
	if err != nil {
		t.Fatal(err)
	}
	var cp checkpoint
	if err := json.Unmarshal(data, &cp); err != nil || uint64(cp.Records) != last {
		t.Fatalf("checkpoint.json at record %d (%v), the last checkpoint record is %d", cp.Records, err, last)
	}
	if got := openT(t, Options{Dir: dir}).Progress(digest).Calls(benchCall.StepIndex); got != 40 {
		t.Fatalf("%d calls after reopen, want 40", got)
	}
}

// TestCompleteLater: an outcome counts at once (the step is done for the
// next decision) while its record waits for write, or for the next record
// written, which it precedes; a step put on hold is not put off; a crash
// before write loses the record but not the count.
func TestCompleteLater(t *testing.T) {
	ctx := context.Background()
	open := func(t *testing.T) (*Ledger, Ticket) {
		l := openT(t, Options{Dir: t.TempDir(), FlushInterval: time.Hour})
		// Few calls left: counted one by one, no lease.
		tk, err := l.Reserve(ctx, Reservation{Call: benchCall, MaxCalls: 10})
		if err != nil {
			t.Fatal(err)
		}
		return l, tk
	}
	done := func(l *Ledger) bool { return l.Progress(digest).Done(benchCall.StepIndex) }
	outcome := tkOutcome // the outcome record's seq follows the allow's

	t.Run("write writes it", func(t *testing.T) {
		l, tk := open(t)
		write, err := l.CompleteLater(ctx, tk, Outcome{OK: true})
		if err != nil {
			t.Fatal(err)
		}
		if !done(l) {
			t.Fatal("the step is not done before the record is written")
		}
		if journalHas(t, l, outcome(tk), typeOutcome) {
			t.Fatal("the outcome record was written before write")
		}
		write()
		if !journalHas(t, l, outcome(tk), typeOutcome) {
			t.Fatal("write did not write the outcome record")
		}
	})
	t.Run("the next record carries it", func(t *testing.T) {
		l, tk := open(t)
		write, err := l.CompleteLater(ctx, tk, Outcome{OK: true})
		if err != nil {
			t.Fatal(err)
		}
		tk2, err := l.Reserve(ctx, Reservation{Call: benchCall, MaxCalls: 10})
		if err != nil {
			t.Fatal(err)
		}
		if !journalHas(t, l, outcome(tk), typeOutcome) || !journalHas(t, l, tk2.Seq, typeDecision) || tk2.Seq <= outcome(tk) {
			t.Fatalf("journal after the next reservation: outcome %d written %v, allow %d", outcome(tk), journalHas(t, l, outcome(tk), typeOutcome), tk2.Seq)
		}
		write()
		if n := len(readRecords(t, l.AuditPath())); uint64(n) != tk2.Seq {
			t.Fatalf("%d records after write, want %d (no record twice)", n, tk2.Seq)
		}
	})
	t.Run("a step put on hold is written at once", func(t *testing.T) {
		l, tk := open(t)
		write, err := l.CompleteLater(ctx, tk, Outcome{OK: false, Err: "boom", HoldStep: true})
		if err != nil {
			t.Fatal(err)
		}
		if !journalHas(t, l, outcome(tk), typeOutcome) || !l.Progress(digest).Held(benchCall.StepIndex) {
			t.Fatal("a held step's outcome was put off")
		}
		write()
	})
	t.Run("a crash before write keeps the count", func(t *testing.T) {
		l, tk := open(t)
		if _, err := l.CompleteLater(ctx, tk, Outcome{OK: true}); err != nil {
			t.Fatal(err)
		}
		l2 := openT(t, Options{Dir: crashCopyQueued(t, l), FlushInterval: time.Hour})
		pr := l2.Progress(digest)
		if got := pr.Calls(benchCall.StepIndex); got != 1 {
			t.Fatalf("%d calls counted after the crash, want 1", got)
		}
		if pr.Done(benchCall.StepIndex) {
			t.Fatal("the step is done without its outcome record")
		}
	})
	t.Run("a closed ledger refuses", func(t *testing.T) {
		l, tk := open(t)
		l.Close()
		write, err := l.CompleteLater(ctx, tk, Outcome{OK: true})
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("err = %v, want ErrClosed", err)
		}
		write() // harmless
	})
}

// tkOutcome is the seq the outcome of tk gets when nothing came between.
func tkOutcome(tk Ticket) uint64 { return tk.Seq + 1 }
