package pgstate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/planlock/planlock/internal/testkit/pgtest"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/proxy/ledger/pgstate"
)

// Backends terminated under a running replica (pg_terminate_backend, as an
// operator or a failover does) fail batch transactions mid-run. Every call
// Reserve let through must end with its allow record and its outcome in the
// chain: a failed batch refuses the calls it carried and retries the
// outcomes of calls already forwarded, never drops them.
func TestTerminatedBackendsLoseNoForwardedRecord(t *testing.T) {
	for _, tt := range []struct {
		name     string
		noLeases bool
	}{{"leases", false}, {"no leases", true}} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			url := migrated(t, pgtest.New(t))
			s := openOpts(t, pgstate.Options{URL: url, NoLeases: tt.noLeases, Replica: "r1", LeaseTTL: time.Minute})
			var forwarded, refused atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						tk, err := s.Reserve(ctx, ledger.Reservation{Call: call("s", 0), MaxCalls: 1 << 30})
						if err != nil {
							if !errors.Is(err, pgstate.ErrUnavailable) {
								t.Errorf("worker %d: %v", w, err)
								return
							}
							refused.Add(1)
							continue
						}
						forwarded.Add(1) // the call reached the upstream
						_ = s.Complete(ctx, tk, ledger.Outcome{OK: true})
					}
				}()
			}
			killed := 0
			for range 30 {
				time.Sleep(20 * time.Millisecond)
				n, err := terminate(ctx, url, "planlock")
				if err != nil {
					t.Fatal(err)
				}
				killed += n
			}
			close(stop)
			wg.Wait()
			if killed == 0 || forwarded.Load() == 0 {
				t.Fatalf("terminated %d backends, forwarded %d calls: the test did not exercise the fault", killed, forwarded.Load())
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			recs := auditRecords(t, url)
			allows := map[float64]bool{}
			for _, r := range recs {
				if r["type"] == "decision" && r["decision"] == "allow" {
					allows[r["seq"].(float64)] = true
				}
			}
			outcomes := map[float64]bool{}
			for _, r := range recs {
				if r["type"] == "outcome" {
					ref, _ := r["ref"].(float64)
					if !allows[ref] {
						t.Errorf("outcome %v refers to %v, not an allow record", r["seq"], r["ref"])
					}
					outcomes[ref] = true
				}
			}
			// A batch whose commit's fate was unknown may have committed
			// records of calls it refused: at least, never fewer.
			if int64(len(allows)) < forwarded.Load() {
				t.Fatalf("%d calls forwarded but only %d allow records (%d backends terminated, %d calls refused)", forwarded.Load(), len(allows), killed, refused.Load())
			}
			if int64(len(outcomes)) < forwarded.Load() {
				t.Fatalf("%d calls forwarded but only %d have an outcome record (%d backends terminated)", forwarded.Load(), len(outcomes), killed)
			}
			t.Logf("forwarded %d, refused %d, %d backends terminated", forwarded.Load(), refused.Load(), killed)
		})
	}
}

// terminate ends every backend of application_name app but its own.
func terminate(ctx context.Context, url, app string) (int, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = $1 AND pid <> pg_backend_pid()) t`, app).Scan(&n)
	return n, err
}

// A foreign session idle in a transaction that holds the head row: every
// change fails within the store's timeout with an error that names the lock
// and its holder's pid and application_name, and service resumes when it
// lets go.
func TestForeignLockOnHeadIsBoundedAndNamed(t *testing.T) {
	for _, tt := range []struct {
		name string
		lock string
		max  int // 100: every call its own transaction; 100000: calls inside a lease
	}{
		{"select for update", "SELECT seq FROM planlock_head FOR UPDATE", 100},
		{"update", "UPDATE planlock_head SET seq = seq", 100},
		{"lock table", "LOCK TABLE planlock_head IN EXCLUSIVE MODE", 100},
		{"select for update, leased calls", "SELECT seq FROM planlock_head FOR UPDATE", 100000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			url := migrated(t, pgtest.New(t))
			s := openOpts(t, pgstate.Options{URL: url, Timeout: 2 * time.Second, LeaseTTL: time.Minute})
			if _, err := s.Reserve(ctx, ledger.Reservation{Call: call("s", 0), MaxCalls: tt.max}); err != nil {
				t.Fatal(err)
			}
			cfg, err := pgx.ParseConfig(url)
			if err != nil {
				t.Fatal(err)
			}
			cfg.RuntimeParams["application_name"] = "foreign-batch-job"
			foreign, err := pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer foreign.Close(ctx)
			var pid int
			if err := foreign.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
				t.Fatal(err)
			}
			tx, err := foreign.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, tt.lock); err != nil {
				t.Fatal(err)
			}
			// Several calls at once, as replicas' clients send them.
			errs := make([]error, 4)
			var wg sync.WaitGroup
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, errs[i] = s.Reserve(ctx, ledger.Reservation{Call: call("s", 0), MaxCalls: tt.max})
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err == nil {
					t.Fatalf("call %d passed while a foreign session held the head row", i)
				}
				msg := err.Error()
				for _, want := range []string{"lock wait timeout on the head row", fmt.Sprintf("pid %d", pid), `"foreign-batch-job"`} {
					if !strings.Contains(msg, want) || !errors.Is(err, pgstate.ErrUnavailable) {
						t.Fatalf("call %d: %v\nwant it to name %s", i, err, want)
					}
				}
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Reserve(ctx, ledger.Reservation{Call: call("s", 0), MaxCalls: tt.max}); err != nil {
				t.Fatalf("after the foreign session let go: %v", err)
			}
			if p := s.Progress(digest); tt.max == 100 && p.Calls(0) != 2 {
				t.Fatalf("counted %d calls, want 2 (the refused ones are not counted)", p.Calls(0))
			}
		})
	}
}
