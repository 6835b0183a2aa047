package proxy

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/proxy/gate"
	"github.com/planlock/planlock/proxy/ledger"
)

// A resource read is counted under an index after the plan's steps; it must
// neither close a step of a sequential plan nor be refused by the order.
func TestReadsStayOutOfTheStepOrder(t *testing.T) {
	plan, diags := hclplan.Parse("plan.hcl", []byte(`
plan "p" {
  goal = "read, then act in order"
  step "a" { tool = "a" }
  step "b" { tool = "b" }
  resource "doc" {
    uri       = "file:///doc"
    max_reads = 2
  }
}
`))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	ctx := context.Background()
	l, err := ledger.Open(ctx, ledger.Options{Dir: filepath.Join(t.TempDir(), "state")})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	st := &orderState{State: l, steps: map[string]int{}}
	st.register(plan)
	g := gate.New(plan)
	read := ledger.Reservation{Call: ledger.Call{PlanDigest: plan.Digest, Step: "resource:doc", StepIndex: resourceIndex(plan, 0), Tool: "resources/read"}, MaxCalls: 2}

	tests := []struct {
		name     string
		reserve  ledger.Reservation
		wantCur  int
		wantStep string // a step the gate must still allow ("" none)
		wantErr  error
	}{
		{"a read before any step", read, 0, "a", nil},
		{"step a", ledger.Reservation{Call: ledger.Call{PlanDigest: plan.Digest, Step: "a", StepIndex: 0, Tool: "a"}, MaxCalls: 1}, 0, "", nil},
		{"a read after step a", read, 0, "", nil},
		{"a third read is over max_reads", read, 0, "", ledger.ErrExhausted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rv := tc.reserve
			rv.Check = func(pr ledger.Progress) error {
				if pr.Current != tc.wantCur {
					t.Errorf("Check sees Current %d, want %d", pr.Current, tc.wantCur)
				}
				return nil
			}
			tk, err := st.Reserve(ctx, rv)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Reserve: %v, want %v", err, tc.wantErr)
			}
			if err == nil {
				if err := st.Complete(ctx, tk, ledger.Outcome{OK: true}); err != nil {
					t.Fatal(err)
				}
			}
			pr := st.Progress(plan.Digest)
			if pr.Current != tc.wantCur {
				t.Fatalf("Current %d, want %d", pr.Current, tc.wantCur)
			}
			if tc.wantStep != "" {
				if _, f := g.Check(time.Now(), tc.wantStep, map[string]any{}, ledgerProgress{&pr}); f != nil {
					t.Fatalf("step %s blocked after a read: %s", tc.wantStep, f.Reason)
				}
			}
		})
	}
	// Step b is still reachable after reads (a is done).
	pr := st.Progress(plan.Digest)
	if _, f := g.Check(time.Now(), "b", map[string]any{}, ledgerProgress{&pr}); f != nil {
		t.Fatalf("step b: %s", f.Reason)
	}
	// Without the wrapper the ledger's Current is the read's index: the
	// wrapper is what keeps the order.
	if raw := l.Progress(plan.Digest); raw.Current != resourceIndex(plan, 0) {
		t.Fatalf("ledger Current %d, want the read's index %d", raw.Current, resourceIndex(plan, 0))
	}
}

// resourceIndex and promptIndex are where the state keeps the counter of
// resource block i and prompt block i (gate.Counter.Index).
func resourceIndex(plan *hclplan.Plan, i int) int { return len(plan.Steps) + i }

func promptIndex(plan *hclplan.Plan, i int) int { return len(plan.Steps) + len(plan.Resources) + i }
