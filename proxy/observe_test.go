package proxy

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planlock/planlock/internal/testkit/peers"
	"github.com/planlock/planlock/proxy/ledger"
)

// auditRecords reads an audit log's records (type, decision, step, tool, reason).
func auditRecords(t *testing.T, path string) []map[string]any {
	t.Helper()
	return peers.AuditRecords(t, path)
}

// TestObserveInProcess runs observe mode in process (under -race, the
// in-memory progress is exercised by concurrent calls): everything reaches
// the refund server, nothing is counted in the ledger, and the would-be
// decisions follow the plan.
func TestObserveInProcess(t *testing.T) {
	h := newHarness(t, refundPlan, harnessOpts{observe: Observe{All: true}})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if text, isErr := h.call("get_order", `{"order_id":"4711"}`); isErr {
				t.Errorf("not forwarded: %s", text)
			}
		}()
	}
	wg.Wait()
	if text, isErr := h.call("refund_customer", `{"order_id":"4711","amount":50,"currency":"EUR"}`); isErr {
		t.Fatalf("refund not forwarded: %s", text)
	}
	if c := h.upstreamCalls(); c["get_order"] != 8 || c["refund_customer"] != 1 {
		t.Fatalf("the refund server saw %v, want 8 lookups and the refund", c)
	}
	if p := h.ledger.Progress(h.plan.Digest); p.Calls(0) != 0 || p.Calls(1) != 0 {
		t.Fatalf("observe mode counted calls: %d, %d", p.Calls(0), p.Calls(1))
	}
	n := map[any]int{}
	for _, r := range auditRecords(t, h.audit) {
		if r["type"] == "observe" {
			n[r["decision"]]++
		}
	}
	if n["would_allow"] != 3 || n["would_block"] != 6 { // 3 lookups allowed, 5 over max_calls, the refund's amount over its max
		t.Fatalf("decisions %v", n)
	}
}

// An observed step asks no hold keeper: a call whose hold was rejected is
// audited would_block, its pull request (which could be reopened) or not.
func TestObserveStepRejectedHold(t *testing.T) {
	for _, prURL := range []string{"", "https://github.example/acme/plans/pull/7"} {
		t.Run("pr="+prURL, func(t *testing.T) {
			h := newHarness(t, anyOrder(refundPlan), harnessOpts{observe: Observe{Steps: []string{"email"}}})
			call := ledger.Call{PlanDigest: h.plan.Digest, Tool: "send_email", Args: []byte(`{"body":"hi","to":"customer-4711@example.com"}`)}
			hold, err := h.ledger.NewHold(h.ctx, call, ledger.HoldSpec{Reason: "approval", Cause: "approval", Expires: time.Now().Add(time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			if prURL != "" {
				if _, err := h.ledger.UpdateHold(h.ctx, hold.ID, ledger.HoldUpdate{PRURL: prURL}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := h.ledger.UpdateHold(h.ctx, hold.ID, ledger.HoldUpdate{State: ledger.HoldRejected}); err != nil {
				t.Fatal(err)
			}
			if text, isErr := h.call("send_email", `{"to":"customer-4711@example.com","body":"hi"}`); isErr {
				t.Fatalf("observed call not forwarded: %s", text)
			}
			var got []string
			for _, r := range auditRecords(t, h.audit) {
				if r["type"] == "observe" {
					got = append(got, fmt.Sprintf("%v: %v", r["decision"], r["reason"]))
				}
			}
			if len(got) != 1 || !strings.HasPrefix(got[0], "would_block: ") || !strings.Contains(got[0], "hold "+hold.ID+" for exactly this call was rejected") {
				t.Fatalf("observe records %q", got)
			}
		})
	}
}
