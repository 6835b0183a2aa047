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
