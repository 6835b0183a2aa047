package proxy

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/planlock/planlock/proxy/holdreq"
	"github.com/planlock/planlock/proxy/ledger"
)

// scriptedApprover stands in for approval pull requests (package approvals
// tests the real one, and its hold loop test runs it end to end): it records
// what the proxy asks and answers with a scripted outcome, approving in the
// real ledger so that the proxy's consumption is the real one.
type scriptedApprover struct {
	led     *ledger.Ledger
	outcome holdreq.Outcome
	message string

	mu   sync.Mutex
	reqs []holdreq.Request
}

func (s *scriptedApprover) Decide(ctx context.Context, r holdreq.Request) holdreq.Decision {
	s.mu.Lock()
	s.reqs = append(s.reqs, r)
	s.mu.Unlock()
	h, err := s.led.NewHold(ctx, r.Call, ledger.HoldSpec{Reason: r.Reason, Cause: r.Cause, ObservedPin: r.ObservedPin, Expires: r.Expires})
	if err != nil {
		return holdreq.Decision{Outcome: holdreq.Refused, Message: err.Error()}
	}
	if s.outcome == holdreq.Approved && h.State == ledger.HoldPending {
		if h, err = s.led.UpdateHold(ctx, h.ID, ledger.HoldUpdate{State: ledger.HoldApproved}); err != nil {
			return holdreq.Decision{Outcome: holdreq.Refused, Message: err.Error()}
		}
	}
	return holdreq.Decision{Outcome: s.outcome, Hold: h, Message: s.message}
}

func (s *scriptedApprover) last(t *testing.T) holdreq.Request {
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
		outcome  holdreq.Outcome
		message  string
		want     []string // fragments of the answer
		isError  bool
		upstream int // calls of tool that reach the upstream
		pin      string
	}{
		{name: "approval each, held", plan: anyOrder(refundPlan), tool: "send_email", args: `{"to":"customer-4711@example.com","body":"hi"}`,
			outcome: holdreq.Held, message: "held: needs approval: pull request https://github.example/acme/plans/pull/1", want: []string{"pull/1"}, isError: true},
		{name: "approval each, approved runs once", plan: anyOrder(refundPlan), tool: "send_email", args: `{"to":"customer-4711@example.com","body":"hi"}`,
			outcome: holdreq.Approved, want: []string{`"status":"sent"`}, upstream: 1},
		{name: "refused is a block", plan: anyOrder(refundPlan), tool: "send_email", args: `{"to":"customer-4711@example.com","body":"hi"}`,
			outcome: holdreq.Refused, message: "rejected: do not retry this call", want: []string{`blocked by plan "refund-4711": rejected: do not retry this call`}, isError: true},
		{name: "pin hold carries the observed value", plan: anyOrder(refundPlan), badPin: true, tool: "refund_customer", args: `{"order_id":"4711","amount":5,"currency":"EUR"}`,
			outcome: holdreq.Held, message: "held", want: []string{"held"}, isError: true, pin: "0c1f2e3d4b5a6978"},
		{name: "approved pin hold runs once", plan: anyOrder(refundPlan), badPin: true, tool: "refund_customer", args: `{"order_id":"4711","amount":5,"currency":"EUR"}`,
			outcome: holdreq.Approved, want: []string{`"status":"refunded"`}, upstream: 1, pin: "0c1f2e3d4b5a6978"},
		{name: "approved violation passes its bound", plan: violation, tool: "get_order", args: `{"order_id":"9"}`,
			outcome: holdreq.Approved, want: []string{`not found`}, isError: true, upstream: 1},
		{name: "approved call of a tool in no step stays blocked", plan: violation, tool: "get_script_by_path", args: `{"path":"x"}`,
			outcome: holdreq.Approved, want: []string{"is in no step of the plan: it needs a new plan"}, isError: true},
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

// A rejected hold that has a pull request is asked about again, because a
// person may have reopened the pull request: the approver gets the rejected
// hold's own request (its causes and observed pin), and what it answers
// stands. A rejected hold without a pull request, or one kept in the state
// alone, stays blocked without asking anyone.
func TestRejectedHoldsWithAPullRequestAreAskedAgain(t *testing.T) {
	const (
		refund = `{"order_id":"4711","amount":5,"currency":"EUR"}`
		email  = `{"to":"customer-4711@example.com","body":"hi"}`
		prURL  = "https://github.example/acme/plans/pull/7"
	)
	tests := []struct {
		name      string
		approvals bool
		badPin    bool
		tool      string
		args      string
		prURL     string
		outcome   holdreq.Outcome // the approver's second answer
		message   string
		want      []string
		asked     bool // the approver is asked about the rejected hold
		cause     string
		pin       string
	}{
		{name: "reopened pull request waits again", approvals: true, tool: "send_email", args: email, prURL: prURL,
			outcome: holdreq.Held, message: "held: needs approval: pull request " + prURL + " (reopened)", want: []string{"(reopened)"}, asked: true, cause: "approval"},
		{name: "reopened pin hold asks with the pin the approver saw", approvals: true, badPin: true, tool: "refund_customer", args: refund, prURL: prURL,
			outcome: holdreq.Held, message: "held: reopened", want: []string{"held: reopened"}, asked: true, cause: "pin", pin: "0c1f2e3d4b5a6978"},
		{name: "still closed is refused", approvals: true, tool: "send_email", args: email, prURL: prURL,
			outcome: holdreq.Refused, message: "rejected: do not retry this call", want: []string{`blocked by plan "refund-4711": rejected: do not retry this call`}, asked: true, cause: "approval"},
		{name: "an approval cannot come of a rejected hold", approvals: true, tool: "send_email", args: email, prURL: prURL,
			outcome: holdreq.Approved, want: []string{"blocked", "was rejected; do not retry it"}, asked: true, cause: "approval"},
		{name: "rejected without a pull request stays blocked", approvals: true, tool: "send_email", args: email,
			outcome: holdreq.Held, message: "held", want: []string{"blocked", "was rejected; do not retry it"}},
		{name: "rejected locally (planlock holds reject) stays blocked", approvals: true, tool: "send_email", args: email, prURL: "local", // what a local approval records
			outcome: holdreq.Held, message: "held", want: []string{"blocked", "was rejected; do not retry it"}},
		{name: "a branch deleted without a forge stays blocked", approvals: true, tool: "send_email", args: email, prURL: "https://github.example/acme/plans/compare/main...planlock/hold/x",
			outcome: holdreq.Held, message: "held", want: []string{"blocked", "was rejected; do not retry it"}},
		{name: "state holds: rejected with a pull request stays blocked", tool: "send_email", args: email, prURL: prURL,
			want: []string{"blocked", "was rejected; do not retry it"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, anyOrder(refundPlan), harnessOpts{})
			s := &scriptedApprover{led: h.ledger, outcome: holdreq.Held, message: "held: first"}
			if tc.approvals {
				h.proxy.cfg.Approvals = s // before the first call
			}
			if tc.badPin {
				if err := writeHash(h, "0c1f2e3d4b5a6978"); err != nil {
					t.Fatal(err)
				}
			}
			text, isErr := h.call(tc.tool, tc.args)
			if !isErr || !strings.Contains(text, "held") {
				t.Fatalf("first call: %s", text)
			}
			id := holdID(text)
			if tc.approvals {
				hold, ok := h.ledger.FindHold(s.last(t).Call)
				if !ok {
					t.Fatal("no hold recorded")
				}
				id = hold.ID
			}
			if tc.prURL != "" {
				if _, err := h.ledger.UpdateHold(h.ctx, id, ledger.HoldUpdate{PRURL: tc.prURL, PR: prNumber(tc.prURL, prURL)}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := h.ledger.UpdateHold(h.ctx, id, ledger.HoldUpdate{State: ledger.HoldRejected}); err != nil {
				t.Fatal(err)
			}
			s.mu.Lock()
			asked := len(s.reqs)
			s.outcome, s.message = tc.outcome, tc.message
			s.mu.Unlock()

			text, isErr = h.call(tc.tool, tc.args)
			if !isErr {
				t.Fatalf("got a result: %s", text)
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Fatalf("answer lacks %q: %s", w, text)
				}
			}
			s.mu.Lock()
			again := len(s.reqs) > asked
			s.mu.Unlock()
			if again != tc.asked {
				t.Fatalf("approver asked again: %v, want %v", again, tc.asked)
			}
			if tc.asked {
				if r := s.last(t); r.Cause != tc.cause || r.ObservedPin != tc.pin || r.PlanName != "refund-4711" || r.Call.Tool != tc.tool {
					t.Fatalf("request %+v, want cause %q pin %q", r, tc.cause, tc.pin)
				}
			}
			if n := h.upstreamCalls()[tc.tool]; n != 0 {
				t.Fatalf("the upstream got %d calls of %s", n, tc.tool)
			}
			h.verifyAudit()
		})
	}
}

// prNumber is the number the forge gave the test's pull request.
func prNumber(url, numbered string) int {
	if url == numbered {
		return 7
	}
	return 0
}
