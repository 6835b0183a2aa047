// Package ledgertest is the state backends' conformance suite: one table
// of cases (reservations against max_calls, holds, leases, step order,
// on_error, outcome records, restart and replay) that every backend of the
// proxy's state must decide alike. The file ledger, the PostgreSQL state
// and their configurations (a state key, no leases) run it from their own
// tests; a disagreement between them fails one of them.
package ledgertest

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/planlock/planlock/proxy/ledger"
)

// State is what the suite drives: the proxy's state (proxy.State) with
// the operations the CLI and the hold approvals use.
type State interface {
	Reserve(ctx context.Context, rv ledger.Reservation) (ledger.Ticket, error)
	Complete(ctx context.Context, t ledger.Ticket, o ledger.Outcome) error
	Block(ctx context.Context, c ledger.Call, reason string) error
	Observe(ctx context.Context, c ledger.Call, decision, reason string) error
	NewHold(ctx context.Context, c ledger.Call, spec ledger.HoldSpec) (ledger.Hold, error)
	UpdateHold(ctx context.Context, id string, u ledger.HoldUpdate) (ledger.Hold, error)
	LoadPlan(ctx context.Context, p ledger.PlanLoad) error
	Progress(planDigest string) ledger.Progress
	FindHold(c ledger.Call) (ledger.Hold, bool)
	GetHold(id string) (ledger.Hold, bool)
	ListHolds() []ledger.Hold
	Close() error
}

// Backend is one fresh state, opened and reopened by the suite.
type Backend interface {
	// Open opens the state, the same one at every call once the last
	// State opened was closed or crashed; now is its clock.
	Open(t *testing.T, now func() time.Time) State
	// Crash ends s as a killed process would: what it would write at
	// Close (returned leases) is never written; records it queued but did
	// not write may be lost. The next Open starts from what was stored.
	Crash(t *testing.T, s State)
	// Journal is the state's records, one line each, newline-terminated,
	// as a journal file holds them; called with no State open.
	Journal(t *testing.T) []byte
	// Leases reports whether the state counts calls ahead in leases.
	Leases() bool
	// LeaseTTL is how long after a crash the calls of a lease the dead
	// process held are held back before they settle as used (zero: they
	// count as used at the next Open).
	LeaseTTL() time.Duration
}

// clock is the suite's clock: it moves only when a case moves it.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

// Now reads the clock.
func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestBackend runs every case against a fresh state from newBackend.
func TestBackend(t *testing.T, newBackend func(t *testing.T) Backend) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := &harness{T: t, b: newBackend(t), clk: &clock{t: start}}
			h.S = h.b.Open(t, h.clk.Now)
			t.Cleanup(func() {
				if h.S != nil {
					h.S.Close()
				}
			})
			c.run(h)
			h.replay()
		})
	}
}

// start is the clock's time when a case begins.
var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// digest is the plan digest the cases' calls carry.
const digest = "sha256:c0ffee0000000000000000000000000000000000000000000000000000000000"

// harness is one case's state under test and its clock.
type harness struct {
	*testing.T
	S   State
	b   Backend
	clk *clock
}

var ctx = context.Background()

// Restart closes the state and opens it again.
func (h *harness) Restart() {
	h.Helper()
	if err := h.S.Close(); err != nil {
		h.Fatalf("close: %v", err)
	}
	h.S = h.b.Open(h.T, h.clk.Now)
}

// Crash kills the state and opens what it left.
func (h *harness) Crash() {
	h.Helper()
	h.b.Crash(h.T, h.S)
	h.S = h.b.Open(h.T, h.clk.Now)
}

// call is the call of step i with the given arguments.
func call(i int, args string) ledger.Call {
	return ledger.Call{PlanDigest: digest, Step: stepName(i), StepIndex: i, Tool: "refund", Args: json.RawMessage(args), Caller: "token:ci"}
}

func stepName(i int) string { return string(rune('a'+i)) + "-step" }

func rv(i, max int, args string) ledger.Reservation {
	return ledger.Reservation{Call: call(i, args), MaxCalls: max}
}

// reserve takes n calls of step i, which must all be granted, and returns
// the tickets.
func (h *harness) reserve(i, max, n int) []ledger.Ticket {
	h.Helper()
	var ts []ledger.Ticket
	for range n {
		t, err := h.S.Reserve(ctx, rv(i, max, `{"id":1}`))
		if err != nil {
			h.Fatalf("reserve step %d (call %d of max %d): %v", i, len(ts)+1, max, err)
		}
		ts = append(ts, t)
	}
	return ts
}

// calls checks the calls counted of step i.
func (h *harness) calls(i, want int) {
	h.Helper()
	if got := h.S.Progress(digest).Calls(i); got != want {
		h.Fatalf("step %d: %d calls counted, want %d", i, got, want)
	}
}

// replay checks the records against the state that made them: the
// journal verifies, and replayed into a fresh state machine it gives the
// order state, counts and holds the backend reports after a restart.
func (h *harness) replay() {
	h.Helper()
	h.Restart()
	want := h.S.Progress(digest)
	holds := h.S.ListHolds()
	if err := h.S.Close(); err != nil {
		h.Fatalf("close: %v", err)
	}
	h.S = nil
	data := h.b.Journal(h.T)
	m := ledger.NewMachine(false)
	if err := ledger.JournalLines(data, m.Apply); err != nil {
		h.Fatalf("replay the journal: %v", err)
	}
	got := m.Progress(digest)
	if d := diffProgress(got, want); d != "" {
		h.Fatalf("journal replayed: %s", d)
	}
	mh := m.ListHolds(h.clk.Now())
	if len(mh) != len(holds) {
		h.Fatalf("journal replayed: %d holds, the state lists %d", len(mh), len(holds))
	}
	for i := range mh {
		if d := diffHold(mh[i], holds[i]); d != "" {
			h.Fatalf("journal replayed: hold %d: %s", i, d)
		}
	}
}
