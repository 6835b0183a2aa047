package pgstate_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
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

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

const digest = "sha256:plan"

func migrated(t *testing.T, url string) string {
	t.Helper()
	if _, _, err := pgstate.Migrate(context.Background(), url); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return url
}

func open(t *testing.T, url string) *pgstate.Store {
	t.Helper()
	s, err := pgstate.Open(context.Background(), pgstate.Options{URL: url, Timeout: 3 * time.Second})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func call(step string, i int) ledger.Call {
	return ledger.Call{PlanDigest: digest, Step: step, StepIndex: i, Tool: "refund", Args: json.RawMessage(`{"id":1}`)}
}

func exec(t *testing.T, url, sql string) error {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

func TestSchemaChecks(t *testing.T) {
	ctx := context.Background()
	url := pgtest.New(t)
	_, err := pgstate.Open(ctx, pgstate.Options{URL: url})
	if !errors.Is(err, pgstate.ErrNotMigrated) || !strings.Contains(err.Error(), "planlock state migrate") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("un-migrated database: %v", err)
	}
	from, to, err := pgstate.Migrate(ctx, url)
	if err != nil || from != 0 || to != pgstate.SchemaVersion() {
		t.Fatalf("migrate: %d -> %d, %v", from, to, err)
	}
	if from, to, err := pgstate.Migrate(ctx, url); err != nil || from != to {
		t.Fatalf("second migrate: %d -> %d, %v", from, to, err)
	}
	open(t, url).Close()
	if err := exec(t, url, "INSERT INTO planlock_schema (version) VALUES (999)"); err != nil {
		t.Fatal(err)
	}
	if _, err := pgstate.Open(ctx, pgstate.Options{URL: url}); !errors.Is(err, pgstate.ErrSchemaNewer) {
		t.Fatalf("newer schema: %v", err)
	}
	if _, _, err := pgstate.Migrate(ctx, url); !errors.Is(err, pgstate.ErrSchemaNewer) {
		t.Fatalf("migrate of a newer schema: %v", err)
	}
}

func TestUnreachableFailsClosed(t *testing.T) {
	_, err := pgstate.Open(context.Background(), pgstate.Options{URL: "postgres://planlock:s3cretpw@127.0.0.1:1/x?connect_timeout=2", Timeout: 2 * time.Second})
	if !errors.Is(err, pgstate.ErrUnavailable) || strings.Contains(err.Error(), "s3cretpw") {
		t.Fatalf("unreachable: %v", err)
	}
}

func TestRulesAndSharedState(t *testing.T) {
	ctx := context.Background()
	url := migrated(t, pgtest.New(t))
	a, b := open(t, url), open(t, url)
	if err := a.LoadPlan(ctx, ledger.PlanLoad{Name: "refund", Digest: digest, SignedAt: time.Unix(2000, 0)}); err != nil {
		t.Fatal(err)
	}
	// The no-downgrade mark written by one replica binds the other.
	var de *ledger.DowngradeError
	if err := b.LoadPlan(ctx, ledger.PlanLoad{Name: "refund", Digest: "sha256:old", SignedAt: time.Unix(1000, 0)}); !errors.As(err, &de) {
		t.Fatalf("downgrade through another replica: %v", err)
	}
	tk, err := a.Reserve(ctx, ledger.Reservation{Call: call("s", 0), MaxCalls: 2})
	if err != nil || tk.Used != 1 {
		t.Fatalf("reserve: %+v %v", tk, err)
	}
	if _, err := b.Reserve(ctx, ledger.Reservation{Call: call("s", 0), MaxCalls: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Reserve(ctx, ledger.Reservation{Call: call("s", 0), MaxCalls: 2}); !errors.Is(err, ledger.ErrExhausted) {
		t.Fatalf("third call of max 2 over two replicas: %v", err)
	}
	if err := a.Complete(ctx, tk, ledger.Outcome{OK: true}); err != nil {
		t.Fatal(err)
	}
	if p := b.Progress(digest); p.Calls(0) != 2 || !p.Done(0) {
		t.Fatalf("progress read by the other replica: calls %d done %v", p.Calls(0), p.Done(0))
	}
	// Holds: made on one replica, approved through a third, consumed once.
	h, err := a.NewHold(ctx, call("s", 0), ledger.HoldSpec{Reason: "over", Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	c := open(t, url)
	if _, err := c.UpdateHold(ctx, h.ID, ledger.HoldUpdate{State: ledger.HoldApproved}); err != nil {
		t.Fatal(err)
	}
	// Another replica reads the approval back from the database: it is
	// not used on the database's word, until that replica verified the
	// signed approval itself (internal/approvals) and recorded it.
	rv := ledger.Reservation{Call: call("s", 0), MaxCalls: 2, HoldID: h.ID, OverLimit: true}
	if got, ok := b.FindHold(call("s", 0)); !ok || got.State != ledger.HoldPending {
		t.Fatalf("approval read back by another replica: %+v %v, want pending", got, ok)
	}
	if _, err := b.Reserve(ctx, rv); !errors.Is(err, ledger.ErrHoldState) {
		t.Fatalf("consume an approval read back: %v", err)
	}
	if _, err := b.UpdateHold(ctx, h.ID, ledger.HoldUpdate{State: ledger.HoldApproved}); err != nil {
		t.Fatal(err)
	}
	if got, ok := b.FindHold(call("s", 0)); !ok || got.State != ledger.HoldApproved {
		t.Fatalf("hold verified again by another replica: %+v %v", got, ok)
	}
	if _, err := b.Reserve(ctx, rv); err != nil {
		t.Fatalf("consume the approved hold: %v", err)
	}
	if _, err := a.Reserve(ctx, rv); !errors.Is(err, ledger.ErrHoldState) {
		t.Fatalf("consume it again on another replica: %v", err)
	}
	// Check runs atomically with the count.
	errOrder := errors.New("order")
	if _, err := a.Reserve(ctx, ledger.Reservation{Call: call("t", 1), MaxCalls: 5, Check: func(ledger.Progress) error { return errOrder }}); err != errOrder {
		t.Fatalf("check: %v", err)
	}
	if err := a.Block(ctx, call("t", 1), "no"); err != nil {
		t.Fatal(err)
	}
	res, head, err := pgstate.Verify(ctx, url)
	if err != nil || uint64(res.Records) != head.Seq || res.Records != 9 {
		t.Fatalf("verify: %+v %v %v", res, head, err)
	}
}

// Many calls from several replicas against max_calls: never more granted.
func TestConcurrentReplicasNeverExceed(t *testing.T) {
	ctx := context.Background()
	url := migrated(t, pgtest.New(t))
	stores := []*pgstate.Store{open(t, url), open(t, url), open(t, url)}
	for _, max := range []int{1, 37} {
		step := "step" + string(rune('a'+max%26))
		var granted atomic.Int64
		var wg sync.WaitGroup
		for i := range 120 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := stores[i%3].Reserve(ctx, ledger.Reservation{Call: call(step, max), MaxCalls: max})
				switch {
				case err == nil:
					granted.Add(1)
				case !errors.Is(err, ledger.ErrExhausted):
					t.Errorf("reserve: %v", err)
				}
			}()
		}
		wg.Wait()
		if g := granted.Load(); g != int64(max) {
			t.Fatalf("max_calls %d over 3 replicas: %d granted", max, g)
		}
	}
	if _, _, err := pgstate.Verify(ctx, url); err != nil {
		t.Fatal(err)
	}
}

func TestTamperDetected(t *testing.T) {
	ctx := context.Background()
	url := migrated(t, pgtest.New(t))
	s := open(t, url)
	for range 3 {
		if _, err := s.Reserve(ctx, ledger.Reservation{Call: call("s", 0), MaxCalls: 10}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	for _, sql := range []string{"DELETE FROM planlock_audit WHERE seq = 3", "TRUNCATE planlock_audit", "UPDATE planlock_audit SET line = line WHERE seq = 1"} {
		if err := exec(t, url, sql); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// An owner who turns the trigger off and cuts the end is caught by the head.
	if err := exec(t, url, "ALTER TABLE planlock_audit DISABLE TRIGGER USER; DELETE FROM planlock_audit WHERE seq = 3"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := pgstate.Verify(ctx, url); !errors.Is(err, ledger.ErrTruncated) {
		t.Fatalf("verify of a cut table: %v", err)
	}
	if _, err := pgstate.Open(ctx, pgstate.Options{URL: url}); !errors.Is(err, ledger.ErrAnchor) {
		t.Fatalf("open of a cut table: %v", err)
	}
	if err := exec(t, url, `UPDATE planlock_audit SET line = replace(line, '"id":1', '"id":2') WHERE seq = 1`); err != nil {
		t.Fatal(err)
	}
	var ve *ledger.VerifyError
	if _, _, err := pgstate.Verify(ctx, url); !errors.As(err, &ve) || ve.Line != 1 {
		t.Fatalf("verify of an edited record: %v", err)
	}
}

// The database stops under load: calls fail with ErrUnavailable (none is
// granted uncommitted), and service resumes when it is back.
func TestDatabaseDownAndBack(t *testing.T) {
	ctx := context.Background()
	cl := pgtest.Start(t)
	url := migrated(t, cl.NewDatabase(t))
	s := openOpts(t, pgstate.Options{URL: url, Timeout: 3 * time.Second, NoLeases: true})
	if _, err := s.Reserve(ctx, ledger.Reservation{Call: call("s", 0), MaxCalls: 1000}); err != nil {
		t.Fatal(err)
	}
	h, err := s.NewHold(ctx, call("h", 1), ledger.HoldSpec{Reason: "r", Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Stop(); err != nil {
		t.Fatal(err)
	}
	_, err = s.Reserve(ctx, ledger.Reservation{Call: call("s", 0), MaxCalls: 1000})
	if !errors.Is(err, pgstate.ErrUnavailable) {
		t.Fatalf("reserve with the database down: %v", err)
	}
	if _, err := s.UpdateHold(ctx, h.ID, ledger.HoldUpdate{State: ledger.HoldApproved}); !errors.Is(err, pgstate.ErrUnavailable) {
		t.Fatalf("approve with the database down: %v", err)
	}
	if err := cl.StartServer(); err != nil {
		t.Fatal(err)
	}
	var tk ledger.Ticket
	for try := 0; ; try++ {
		tk, err = s.Reserve(ctx, ledger.Reservation{Call: call("s", 0), MaxCalls: 1000})
		if err == nil || try > 50 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || tk.Used != 2 {
		t.Fatalf("after the restart: %+v %v", tk, err)
	}
	if got, ok := s.GetHold(h.ID); !ok || got.State != ledger.HoldPending {
		t.Fatalf("hold after the outage: %+v", got)
	}
	if _, _, err := pgstate.Verify(ctx, url); err != nil {
		t.Fatal(err)
	}
}

// A file state copied into the database keeps every count, hold and mark.
func TestImportFileState(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l, err := ledger.Open(ctx, ledger.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.LoadPlan(ctx, ledger.PlanLoad{Name: "refund", Digest: digest, SignedAt: time.Unix(2000, 0)}); err != nil {
		t.Fatal(err)
	}
	for range 500 { // enough for leases
		tk, err := l.Reserve(ctx, ledger.Reservation{Call: call("s", 0), MaxCalls: 100000})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Complete(ctx, tk, ledger.Outcome{OK: true}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.NewHold(ctx, call("h", 1), ledger.HoldSpec{Reason: "r", Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	snap, err := ledger.Inspect(ctx, ledger.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	want, err := snap.StateDigest()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	url := migrated(t, pgtest.New(t))
	head, got, err := pgstate.Import(ctx, url, data)
	if err != nil {
		t.Fatal(err)
	}
	if got != want || head.Seq != uint64(snap.Records) {
		t.Fatalf("state after the copy %s (head %s), before %s (%d records)", got, head, want, snap.Records)
	}
	if _, _, err := pgstate.Import(ctx, url, data); err == nil {
		t.Fatal("a second copy into a used database was accepted")
	}
	s := open(t, url)
	if p := s.Progress(digest); p.Calls(0) != 500 {
		t.Fatalf("calls after the copy: %d", p.Calls(0))
	}
	if err := s.LoadPlan(ctx, ledger.PlanLoad{Name: "refund", Digest: "x", SignedAt: time.Unix(1000, 0)}); !errors.Is(err, ledger.ErrDowngrade) {
		t.Fatalf("mark after the copy: %v", err)
	}
	if _, err := s.Reserve(ctx, ledger.Reservation{Call: call("s", 0), MaxCalls: 100000}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := pgstate.Verify(ctx, url); err != nil {
		t.Fatal(err)
	}
}

// TestMarksKeyedBySignedPath: in a shared state the no-downgrade mark is
// the signed path's under its trust policy, for every replica and after a
// restart: an older plan for the path is refused under any label, and two
// plans with one label from different paths do not refuse each other.
func TestMarksKeyedBySignedPath(t *testing.T) {
	ctx := context.Background()
	url := migrated(t, pgtest.New(t))
	const trust = "key:sha256:ab"
	a := open(t, url)
	if err := a.LoadPlan(ctx, ledger.PlanLoad{Name: "refund", Digest: "sha256:new", SignedAt: time.Unix(2000, 0), Path: "plans/refund.hcl", Trust: trust}); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b := open(t, url) // another replica, started after the first stopped
	tests := []struct {
		name string
		load ledger.PlanLoad
		ok   bool
	}{
		{"older, another label, same path", ledger.PlanLoad{Name: "refund-wide", Digest: "sha256:old", SignedAt: time.Unix(1000, 0), Path: "plans/refund.hcl", Trust: trust}, false},
		{"older, same label, another path", ledger.PlanLoad{Name: "refund", Digest: "sha256:b", SignedAt: time.Unix(1000, 0), Path: "plans/billing.hcl", Trust: trust}, true},
		{"older, same path, another trust policy", ledger.PlanLoad{Name: "refund", Digest: "sha256:c", SignedAt: time.Unix(1000, 0), Path: "plans/refund.hcl", Trust: "keyless:cd"}, true},
		{"the same signing time again (a restart)", ledger.PlanLoad{Name: "refund", Digest: "sha256:new", SignedAt: time.Unix(2000, 0), Path: "plans/refund.hcl", Trust: trust}, true},
	}
	for _, tt := range tests {
		err := b.LoadPlan(ctx, tt.load)
		var de *ledger.DowngradeError
		switch {
		case tt.ok && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case !tt.ok && (!errors.As(err, &de) || de.Path != "plans/refund.hcl"):
			t.Errorf("%s: %v, want a downgrade of the signed path", tt.name, err)
		}
	}
}
