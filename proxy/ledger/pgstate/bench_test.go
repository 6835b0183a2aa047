package pgstate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/planlock/planlock/internal/testkit/pgtest"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/proxy/ledger/pgstate"
)

type reserver interface {
	Reserve(ctx context.Context, rv ledger.Reservation) (ledger.Ticket, error)
	Complete(ctx context.Context, t ledger.Ticket, o ledger.Outcome) error
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runClients makes b.N calls (Reserve, then Complete) from clients
// goroutines spread over the states, and reports calls/s and the p50 of
// one call's Reserve+Complete.
func runClients(b *testing.B, states []reserver, clients int, cluster *pgtest.Cluster) {
	ctx := context.Background()
	call := ledger.Call{PlanDigest: "sha256:bench", Step: "echo", Tool: "echo", Args: json.RawMessage(`{"message":"hi"}`)}
	var next atomic.Int64
	lat := make([][]time.Duration, clients)
	var dbStart time.Duration
	if cluster != nil {
		dbStart, _ = cluster.CPUTime()
	}
	cpuStart := selfCPU()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := states[c%len(states)]
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				tk, err := st.Reserve(ctx, ledger.Reservation{Call: call, MaxCalls: 1 << 30})
				if err != nil {
					b.Error(err)
					return
				}
				if err := st.Complete(ctx, tk, ledger.Outcome{OK: true, Latency: time.Millisecond}); err != nil {
					b.Error(err)
					return
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50_ms")
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "calls/s")
	self := selfCPU() - cpuStart
	if cluster != nil {
		db, err := cluster.CPUTime()
		if err == nil {
			db -= dbStart
			b.ReportMetric(100*db.Seconds()/(db+self).Seconds(), "db_cpu_%")
		}
	}
}

// BenchmarkStates compares, per call (Reserve then Complete), the embedded
// journal (leases, and one fdatasync per call) with one and three replicas
// on PostgreSQL (each a Store of its own, as a process would have; leases,
// and one replica with a transaction per call), at 16 and 64 concurrent
// clients. All on one machine: the replicas share its
// cores with the database.
func BenchmarkStates(b *testing.B) {
	for _, clients := range []int{16, 64} {
		for _, kind := range []string{"journal-leases", "journal-sync-each-call", "postgres-1-replica", "postgres-1-replica-no-leases", "postgres-3-replicas"} {
			b.Run(fmt.Sprintf("%s/clients=%d", kind, clients), func(b *testing.B) {
				ctx := context.Background()
				switch kind {
				case "journal-leases", "journal-sync-each-call":
					l, err := ledger.Open(ctx, ledger.Options{Dir: b.TempDir(), SyncEachCall: kind == "journal-sync-each-call"})
					if err != nil {
						b.Fatal(err)
					}
					defer l.Close()
					runClients(b, []reserver{l}, clients, nil)
				default:
					cl := pgtest.Shared(b)
					url := cl.NewDatabase(b)
					if _, _, err := pgstate.Migrate(ctx, url); err != nil {
						b.Fatal(err)
					}
					n := 1
					if kind == "postgres-3-replicas" {
						n = 3
					}
					var states []reserver
					for range n {
						s, err := pgstate.Open(ctx, pgstate.Options{URL: url, NoLeases: kind == "postgres-1-replica-no-leases"})
						if err != nil {
							b.Fatal(err)
						}
						defer s.Close()
						states = append(states, s)
					}
					runClients(b, states, clients, cl)
				}
			})
		}
	}
}
