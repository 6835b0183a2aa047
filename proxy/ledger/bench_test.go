package ledger

import (
	"bufio"
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// benchCall is a realistic call: the refund step of the contract's example.
var benchCall = Call{PlanDigest: digest, Step: "refund", StepIndex: 1, Tool: "refund_customer",
	Args: []byte(`{"order_id":"4711","amount":30,"currency":"EUR","note":"damaged in transit"}`)}

func reportSyncs(b *testing.B, l *Ledger, before Stats) {
	st := l.Stats()
	b.ReportMetric(float64(st.Syncs-before.Syncs)/float64(b.N), "syncs/op")
	b.ReportMetric(float64(st.Records-before.Records)/float64(st.Batches-before.Batches), "records/write")
	b.ReportMetric(float64(st.AnchorWrites-before.AnchorWrites)/float64(b.N), "anchor-writes/op")
	b.ReportMetric(float64(st.AnchorSyncs-before.AnchorSyncs)/float64(b.N), "anchor-syncs/op")
}

// reserveModes are the two ways a step is counted: in leases (a large
// budget, the default) and one fdatasync per call (SyncEachCall, as a small
// budget is).
var reserveModes = []struct {
	name string
	o    Options
}{
	{"leases", Options{}},
	{"leases-raw-appends", Options{RawAppends: true}},
	{"sync-each-call", Options{SyncEachCall: true}},
	// With a state key: one HMAC more per record.
	{"leases-state-key", Options{StateKey: benchKey}},
	{"sync-each-call-state-key", Options{SyncEachCall: true, StateKey: benchKey}},
}

// benchKey is a state key for the benchmarks.
var benchKey = func() *StateKey {
	k, err := ParseStateKey([]byte("0123456789abcdef0123456789ABCDEF"))
	if err != nil {
		panic(err)
	}
	return k
}()

// BenchmarkReserve is one forwarded call at a time: Reserve then Complete,
// as the gate does. With sync-each-call expect one fdatasync per call (the
// outcome rides the next reservation's sync); with leases one per 256 calls.
func BenchmarkReserve(b *testing.B) {
	for _, m := range reserveModes {
		b.Run(m.name, func(b *testing.B) {
			o := m.o
			o.Dir, o.FlushInterval = b.TempDir(), time.Hour
			l := openT(b, o)
			ctx := context.Background()
			before := l.Stats()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				tk, err := l.Reserve(ctx, Reservation{Call: benchCall, MaxCalls: math.MaxInt})
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Complete(ctx, tk, Outcome{OK: true, Latency: time.Millisecond}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			reportSyncs(b, l, before)
		})
	}
}

// BenchmarkReserveParallel16 runs 16 goroutines reserving at once: group
// commit shares one fdatasync among the reservations waiting for it.
func BenchmarkReserveParallel16(b *testing.B) {
	for _, m := range reserveModes {
		b.Run(m.name, func(b *testing.B) {
			o := m.o
			o.Dir, o.FlushInterval = b.TempDir(), time.Hour
			l := openT(b, o)
			ctx := context.Background()
			before := l.Stats()
			b.SetParallelism((16 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					tk, err := l.Reserve(ctx, Reservation{Call: benchCall, MaxCalls: math.MaxInt})
					if err != nil {
						b.Error(err)
						return
					}
					if err := l.Complete(ctx, tk, Outcome{OK: true, Latency: time.Millisecond}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			reportSyncs(b, l, before)
		})
	}
}

// BenchmarkReserveRefused is the hot path of a call refused by max_calls:
// no I/O at all.
func BenchmarkReserveRefused(b *testing.B) {
	l := openT(b, Options{Dir: b.TempDir()})
	ctx := context.Background()
	if _, err := l.Reserve(ctx, Reservation{Call: benchCall, MaxCalls: 1}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := l.Reserve(ctx, Reservation{Call: benchCall, MaxCalls: 1}); err == nil {
			b.Fatal("granted past max_calls")
		}
	}
}

// journal100k writes a 100,000-record journal (alternating allow and
// outcome records of the shape Reserve and Complete write) into dir.
func journal100k(b *testing.B, dir string) string { return journalN(b, dir, 100_000) }

// journalN writes an n-record journal of that shape into dir.
func journalN(b *testing.B, dir string, n int) string {
	b.Helper()
	path := filepath.Join(dir, auditName)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var buf []byte
	prev := genesis
	idx := 1
	ok := true
	lat := 12.5
	for i := 1; i <= n; i++ {
		r := record{Time: time.Date(2026, 11, 30, 12, 0, 0, i, time.UTC), Type: typeDecision, Decision: DecisionAllow,
			Plan: digest, Step: "refund", StepIndex: &idx, Tool: "refund_customer", Args: benchCall.Args, Max: 1 << 30, Used: i/2 + 1}
		if i%2 == 0 {
			r = record{Time: r.Time, Type: typeOutcome, Plan: digest, Step: "refund", StepIndex: &idx,
				Tool: "refund_customer", Ref: uint64(i - 1), OK: &ok, LatencyMS: &lat}
		}
		body, err := encodeBody(&r)
		if err != nil {
			b.Fatal(err)
		}
		buf, prev = appendLine(buf[:0], uint64(i), prev, body)
		w.Write(buf)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}

func BenchmarkVerify100k(b *testing.B) {
	data, err := os.ReadFile(journal100k(b, b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := Verify(bytes.NewReader(data))
		if err != nil || res.Records != 100_000 {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkOpen100k is the start-up cost with a 100,000-record journal:
// replaying all of it, or only what follows the checkpoint of a clean Close.
func BenchmarkOpen100k(b *testing.B) { benchOpen(b, 100_000) }

// BenchmarkOpen1M is the same with 1,000,000 records (run it with
// -benchtime 1x: writing the journal alone takes seconds).
func BenchmarkOpen1M(b *testing.B) { benchOpen(b, 1_000_000) }

func benchOpen(b *testing.B, n int) {
	for _, withCheckpoint := range []bool{false, true} {
		name := "full-replay"
		if withCheckpoint {
			name = "checkpoint"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			journalN(b, dir, n)
			// A journal written by hand has no anchor yet.
			l, err := Open(context.Background(), Options{Dir: dir, AcceptMissingAnchor: true})
			if err != nil {
				b.Fatal(err)
			}
			l.Close() // writes the checkpoint
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if !withCheckpoint {
					os.Remove(filepath.Join(dir, checkpointName))
				}
				l, err := Open(context.Background(), Options{Dir: dir})
				if err != nil {
					b.Fatal(err)
				}
				if got := l.Progress(digest).Calls(1); got != n/2 {
					b.Fatalf("replayed %d calls", got)
				}
				b.StopTimer()
				l.Close() // writes the checkpoint
				b.StartTimer()
			}
		})
	}
}

// BenchmarkAnchorUpdate compares ways to keep the anchor up to date after a
// group commit: a write into the open file (synced later, by the flush
// timer), a write and fdatasync each time, and a new file renamed over it.
func BenchmarkAnchorUpdate(b *testing.B) {
	h := Head{Seq: 1, Hash: genesis}
	b.Run("write", func(b *testing.B) {
		a := benchAnchor(b)
		for i := 0; i < b.N; i++ {
			h.Seq++
			if err := a.write(h); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("write+fdatasync", func(b *testing.B) {
		a := benchAnchor(b)
		for i := 0; i < b.N; i++ {
			h.Seq++
			if err := a.write(h); err != nil {
				b.Fatal(err)
			}
			if err := a.sync(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("temp+rename", func(b *testing.B) {
		dir := b.TempDir()
		for i := 0; i < b.N; i++ {
			h.Seq++
			if err := createAnchor(dir, h); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func benchAnchor(b *testing.B) *anchor {
	dir := b.TempDir()
	if err := createAnchor(dir, Head{Hash: genesis}); err != nil {
		b.Fatal(err)
	}
	a, err := openAnchor(dir, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.close() })
	return a
}

// BenchmarkAppendLine is the CPU cost of chaining one allow record of
// benchCall, without and with a state key (its MAC): what the key adds to
// every record, apart from the write and the sync.
func BenchmarkAppendLine(b *testing.B) {
	i := benchCall.StepIndex
	body, err := encodeBody(&record{Time: time.Now().UTC(), Type: typeDecision, Decision: DecisionAllow, Plan: digest,
		Step: benchCall.Step, StepIndex: &i, Tool: benchCall.Tool, Args: benchCall.Args, Max: 1000, Used: 1})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		key  *StateKey
	}{{"no-key", nil}, {"state-key", benchKey}} {
		b.Run(tc.name, func(b *testing.B) {
			var buf []byte
			head := genesis
			b.ReportAllocs()
			for n := 0; n < b.N; n++ {
				buf, head = appendKeyedLine(buf[:0], uint64(n+1), head, body, tc.key)
			}
		})
	}
}
