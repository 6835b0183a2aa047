package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A Machine writes the journal file's records: they verify as a file, and
// a file's journal replayed into a Machine has the file's state.
func TestMachineSharesTheJournalFormat(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m := NewMachine(false)
	c := Call{PlanDigest: "sha256:p", Step: "s", Tool: "t", Args: json.RawMessage(`{"a":1}`)}
	if err := m.LoadPlan(PlanLoad{Name: "p", Digest: "sha256:p", SignedAt: now}, now); err != nil {
		t.Fatal(err)
	}
	tk, err := m.Reserve(Reservation{Call: c, MaxCalls: 1}, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Reserve(Reservation{Call: c, MaxCalls: 1}, now); !errors.Is(err, ErrExhausted) {
		t.Fatalf("second call of max 1: %v", err)
	}
	if err := m.Complete(tk, Outcome{OK: true}, now); err != nil {
		t.Fatal(err)
	}
	h, err := m.NewHold(c, HoldSpec{Reason: "r", Expires: now.Add(time.Hour)}, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.UpdateHold(h.ID, HoldUpdate{State: HoldApproved}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Reserve(Reservation{Call: c, MaxCalls: 1, HoldID: h.ID, OverLimit: true}, now); err != nil {
		t.Fatal(err)
	}
	var journal bytes.Buffer
	for _, l := range m.TakeLines() {
		journal.Write(l)
		journal.WriteByte('\n')
	}
	res, err := Verify(bytes.NewReader(journal.Bytes()))
	if err != nil || uint64(res.Records) != m.Head().Seq || res.Head != m.Head().Hash {
		t.Fatalf("verify: %+v %v, machine head %s", res, err, m.Head())
	}
	again := NewMachine(false)
	if err := JournalLines(journal.Bytes(), again.Apply); err != nil {
		t.Fatal(err)
	}
	d1, _ := m.StateDigest()
	d2, _ := again.StateDigest()
	if d1 != d2 || again.Progress("sha256:p").Calls(0) != 2 {
		t.Fatalf("replayed state differs: %s %s", d1, d2)
	}

	// A file ledger's journal.
	dir := t.TempDir()
	l, err := Open(context.Background(), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for range 300 {
		if _, err := l.Reserve(context.Background(), Reservation{Call: c, MaxCalls: 100000}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, auditName))
	if err != nil {
		t.Fatal(err)
	}
	fm := NewMachine(false)
	if err := JournalLines(data, fm.Apply); err != nil {
		t.Fatal(err)
	}
	snap, err := Inspect(context.Background(), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := snap.StateDigest()
	if got, _ := fm.StateDigest(); got != want || fm.Progress("sha256:p").Calls(0) != 300 {
		t.Fatalf("file journal in a Machine: %s, want %s", got, want)
	}
	// A line out of the chain is refused.
	if err := fm.Apply(bytes.SplitN(journal.Bytes(), []byte("\n"), 2)[0]); err == nil {
		t.Fatal("a foreign line was applied")
	}
}

// Replica leases: a Machine that replays another's lines reaches the same
// counts and open leases, a lease bounds the other replicas, an expired
// lease settles as used and a returned one gives its calls back.
func TestMachineReplicaLeases(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rv := Reservation{Call: Call{PlanDigest: "sha256:p", Step: "s", Tool: "t"}, MaxCalls: 1000}
	a := NewMachine(false)
	t1, g, err := a.LeaseReserve(rv, "a", time.Second, now)
	if err != nil || g.Seq == 0 || g.First != 1 || g.Through != 10 || t1.Used != 1 {
		t.Fatalf("lease: %+v %+v %v", t1, g, err)
	}
	if _, err := a.RecordLeased(g, rv.Call, 2, now); err != nil {
		t.Fatal(err)
	}
	if got := a.Progress("sha256:p").Calls(0); got != 10 {
		t.Fatalf("calls taken with a lease of 10 open: %d", got)
	}
	t2, err := a.Reserve(rv, now) // another replica's call: after the lease
	if err != nil || t2.Used != 11 {
		t.Fatalf("reserve past the lease: %+v %v", t2, err)
	}
	g2, err := a.Lease(rv, "b", time.Hour, now)
	if err != nil || g2.First != 12 || g2.Through != 20 {
		t.Fatalf("second lease: %+v %v", g2, err)
	}
	// Past a's expiry: its 8 unrecorded calls count as used; b returns its 9 (1% of 989 left).
	if n, err := a.SettleLeases("", now.Add(2*time.Second)); err != nil || n != 1 {
		t.Fatalf("settle: %d %v", n, err)
	}
	if err := a.ReturnLease(g2.Seq, now); err != nil {
		t.Fatal(err)
	}
	if got, open := a.Progress("sha256:p").Calls(0), a.OpenLeases(); got != 11 || open != 0 {
		t.Fatalf("after settle and return: calls %d, open leases %d; want 11, 0", got, open)
	}
	var lines [][]byte
	lines = append(lines, a.TakeLines()...)
	b := NewMachine(false)
	for _, l := range lines {
		if err := b.Apply(l); err != nil {
			t.Fatal(err)
		}
	}
	da, _ := a.StateDigest()
	db, _ := b.StateDigest()
	if da != db || b.Progress("sha256:p").Calls(0) != 11 || b.OpenLeases() != 0 || b.Head() != a.Head() {
		t.Fatalf("replay differs: %s vs %s, calls %d", da, db, b.Progress("sha256:p").Calls(0))
	}
	// Below 200 calls left: no lease.
	small := rv
	small.MaxCalls = 150
	if _, g, err := b.LeaseReserve(small, "a", time.Second, now); err != nil || g.Seq != 0 {
		t.Fatalf("lease with 139 left: %+v %v", g, err)
	}
}
