package proxy

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/planlock/planlock/proxy/approvals"
	"github.com/planlock/planlock/proxy/ledger"
)

// scriptedApprover stands in for approval pull requests (package approvals
// tests the real one, and its hold loop test runs it end to end): it records
// what the proxy asks and answers with a scripted outcome, approving in the
// real ledger so that the proxy's consumption is the real one.
type scriptedApprover struct {
	led     *ledger.Ledger
	outcome approvals.Outcome
	message string

	mu   sync.Mutex
	reqs []approvals.Request
}

func (s *scriptedApprover) Decide(ctx context.Context, r approvals.Request) approvals.Decision {
	s.mu.Lock()
	s.reqs = append(s.reqs, r)
	s.mu.Unlock()
	h, err := s.led.NewHold(ctx, r.Call, ledger.HoldSpec{Reason: r.Reason, Cause: r.Cause, ObservedPin: r.ObservedPin, Expires: r.Expires})
	if err != nil {
		return approvals.Decision{Outcome: approvals.Refused, Message: err.Error()}
	}
	if s.outcome == approvals.Approved && h.State == ledger.HoldPending {
		if h, err = s.led.UpdateHold(ctx, h.ID, ledger.HoldUpdate{State: ledger.HoldApproved}); err != nil {
			return approvals.Decision{Outcome: approvals.Refused, Message: err.Error()}
		}
	}
	return approvals.Decision{Outcome: s.outcome, Hold: h, Message: s.message}
}

func (s *scriptedApprover) last(t *testing.T) approvals.Request {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		t.Fatal("the approver was not asked")
	}
	return s.reqs[len(s.reqs)-1]
}

func TestHoldsGoThroughTheApprover(t *testing.T) {
	violation := strings.Replace(anyOrder(refundPlan), `goal = `, `on_violation = "hold"
  goal = `, 1)
	tests := []struct {
		name     string
		plan     string
		badPin   bool
		tool     string
		args     string
		outcome  approvals.Outcome
		message  string
		want     []string // fragments of the answer
		isError  bool
		upstream int // calls of tool that reach the upstream
		pin      string
	}{
		{name: "approval each, held", plan: anyOrder(refundPlan), tool: "send_email", args: `{"to":"customer-4711@example.com","body":"hi"}`,
			outcome: approvals.Held, message: "held: needs approval: pull request https://github.example/acme/plans/pull/1", want: []string{"pull/1"}, isError: true},
		{name: "approval each, approved runs once", plan: anyOrder(refundPlan), tool: "send_email", args: `{"to":"customer-4711@example.com","body":"hi"}`,
			outcome: approvals.Approved, want: []string{`"status":"sent"`}, upstream: 1},
		{name: "refused is a block", plan: anyOrder(refundPlan), tool: "send_email", args: `{"to":"customer-4711@example.com","body":"hi"}`,
			outcome: approvals.Refused, message: "rejected: do not retry this call", want: []string{`blocked by plan "refund-4711": rejected: do not retry this call`}, isError: true},
		{name: "pin hold carries the observed value", plan: anyOrder(refundPlan), badPin: true, tool: "refund_customer", args: `{"order_id":"4711","amount":5,"currency":"EUR"}`,
			outcome: approvals.Held, message: "held", want: []string{"held"}, isError: true, pin: "0c1f2e3d4b5a6978"},
		{name: "approved pin hold runs once", plan: anyOrder(refundPlan), badPin: true, tool: "refund_customer", args: `{"order_id":"4711","amount":5,"currency":"EUR"}`,
			outcome: approvals.Approved, want: []string{`"status":"refunded"`}, upstream: 1, pin: "0c1f2e3d4b5a6978"},
		{name: "approved violation passes its bound", plan: violation, tool: "get_order", args: `{"order_id":"9"}`,
			outcome: approvals.Approved, want: []string{`not found`}, isError: true, upstream: 1},
		{name: "approved call of a tool in no step stays blocked", plan: violation, tool: "get_script_by_path", args: `{"path":"x"}`,
			outcome: approvals.Approved, want: []string{"is in no step of the plan: it needs a new plan"}, isError: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.plan, harnessOpts{})
			s := &scriptedApprover{led: h.ledger, outcome: tc.outcome, message: tc.message}
			h.proxy.cfg.Approvals = s // before the first call
			if tc.badPin {
				if err := writeHash(h, "0c1f2e3d4b5a6978"); err != nil {
					t.Fatal(err)
				}
			}
			text, isErr := h.call(tc.tool, tc.args)
			if isErr != tc.isError {
				t.Fatalf("isError = %v: %s", isErr, text)
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Fatalf("answer lacks %q: %s", w, text)
				}
			}
			r := s.last(t)
			if r.PlanName != "refund-4711" || r.Call.Tool != tc.tool || r.Call.PlanDigest != h.plan.Digest || r.ObservedPin != tc.pin || r.Expires.IsZero() {
				t.Fatalf("request %+v", r)
			}
			if got := h.upstreamCalls()[tc.tool]; got != tc.upstream {
				t.Fatalf("upstream got %d calls of %s, want %d", got, tc.tool, tc.upstream)
			}
			if tc.upstream == 1 {
				if hold, _ := h.ledger.FindHold(r.Call); hold.State != ledger.HoldConsumed {
					t.Fatalf("the approval was not consumed: %s", hold.State)
				}
			}
			h.verifyAudit()
		})
	}
}

func writeHash(h *harness, hash string) error {
	return os.WriteFile(h.hashFile, []byte(hash+"\n"), 0o644)
}
