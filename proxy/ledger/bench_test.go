package ledger

import (
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
}

// reserveModes are the two ways a step is counted: in leases (a large
// budget, the default) and one fdatasync per call (SyncEachCall, as a small
// budget is).
var reserveModes = []struct {
	name string
	o    Options
}{
	{"leases", Options{}},
	{"sync-each-call", Options{SyncEachCall: true}},
}

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
func journal100k(b *testing.B, dir string) string {
	b.Helper()
	var buf []byte
	prev := genesis
	idx := 1
	ok := true
	lat := 12.5
	for i := 1; i <= 100_000; i++ {
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
		buf, prev = appendLine(buf, uint64(i), prev, body)
	}
	path := filepath.Join(dir, auditName)
	if err := os.WriteFile(path, buf, 0o600); err != nil {
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
func BenchmarkOpen100k(b *testing.B) {
	for _, withCheckpoint := range []bool{false, true} {
		name := "full-replay"
		if withCheckpoint {
			name = "checkpoint"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			journal100k(b, dir)
			if withCheckpoint {
				l, err := Open(context.Background(), Options{Dir: dir})
				if err != nil {
					b.Fatal(err)
				}
				l.Close()
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if !withCheckpoint {
					os.Remove(filepath.Join(dir, checkpointName))
				}
				l, err := Open(context.Background(), Options{Dir: dir})
				if err != nil {
					b.Fatal(err)
				}
				if got := l.Progress(digest).Calls(1); got != 50_000 {
					b.Fatalf("replayed %d calls", got)
				}
				b.StopTimer()
				l.Close() // writes the checkpoint
				b.StartTimer()
			}
		})
	}
}
