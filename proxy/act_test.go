package proxy

import (
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planlock/planlock/proxy/ledger"
)

// pinnedPlan is a plan whose one pinned step takes any order id, so that a
// call can fail upstream (order 9999), with the given extra lines in the
// step and in the plan.
func pinnedPlan(stepExtra, planExtra string) string {
	return `
plan "pinned" {
  goal  = "refund with a pinned script"
  order = "any"
` + planExtra + `
  step "refund" {
    tool = "refund_customer"
` + stepExtra + `
    arg "order_id" { any = true }
    arg "amount" {
      min = 1
      max = 30
    }
    arg "currency" { enum = ["EUR"] }
    pin {
      tool  = "get_script_by_path"
      args  = { path = "f/support/refund_customer" }
      field = "hash"
      eq    = "9f86d081884c7d65"
    }
  }
}`
}

// approve marks the hold named in a held answer approved.
func (h *harness) approve(text string) string {
	h.t.Helper()
	id := holdID(text)
	if id == "" {
		h.t.Fatalf("no hold in %q", text)
	}
	if _, err := h.ledger.UpdateHold(h.ctx, id, ledger.HoldUpdate{State: ledger.HoldApproved}); err != nil {
		h.t.Fatal(err)
	}
	return id
}

// TestApprovedHoldsReadThePinAgain: whatever made a pinned step's call wait
// for a human (approval = "each", on_error, a violation, the pin itself),
// the pin is read again just before the approved call is forwarded; a
// value other than the plan's (or than the one the approver saw) holds the
// call again and forwards nothing.
func TestApprovedHoldsReadThePinAgain(t *testing.T) {
	const good = `{"order_id":"4711","amount":5,"currency":"EUR"}`
	tests := []struct {
		name string
		plan string
		// setup makes the call wait for a human and returns the held answer.
		setup func(h *harness) string
		args  string
		// pinAfter is the pin value once the hold is approved.
		pinAfter string
	}{
		{name: "approval each", plan: pinnedPlan(`    approval = "each"`, ""), args: good, pinAfter: "0c1f2e3d4b5a6978",
			setup: func(h *harness) string { text, _ := h.call("refund_customer", good); return text }},
		{name: "on_error", plan: pinnedPlan(`    on_error = "hold"
    max_calls = 3`, ""), args: `{"order_id":"9999","amount":5,"currency":"EUR"}`, pinAfter: "0c1f2e3d4b5a6978",
			setup: func(h *harness) string {
				h.call("refund_customer", `{"order_id":"9999","amount":5,"currency":"EUR"}`) // fails upstream: the step is on hold
				text, _ := h.call("refund_customer", `{"order_id":"9999","amount":5,"currency":"EUR"}`)
				return text
			}},
		{name: "violation", plan: pinnedPlan("", `  on_violation = "hold"`), args: `{"order_id":"4711","amount":50,"currency":"EUR"}`, pinAfter: "0c1f2e3d4b5a6978",
			setup: func(h *harness) string {
				text, _ := h.call("refund_customer", `{"order_id":"4711","amount":50,"currency":"EUR"}`)
				return text
			}},
		{name: "pin, changed again after approval", plan: pinnedPlan("", ""), args: good, pinAfter: "1111111111111111",
			setup: func(h *harness) string {
				if err := os.WriteFile(h.hashFile, []byte("0c1f2e3d4b5a6978\n"), 0o644); err != nil {
					h.t.Fatal(err)
				}
				text, _ := h.call("refund_customer", good)
				return text
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.plan, harnessOpts{})
			text := tt.setup(h)
			if !strings.HasPrefix(text, "held: ") {
				t.Fatalf("setup: %q", text)
			}
			id := h.approve(text)
			before := h.upstreamCalls()["refund_customer"]
			if err := os.WriteFile(h.hashFile, []byte(tt.pinAfter+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			text, isErr := h.call("refund_customer", tt.args)
			if !isErr || !strings.HasPrefix(text, `held: step "refund": pin get_script_by_path.hash = "`+tt.pinAfter+`"`) {
				t.Fatalf("approved call with a changed pin: %v %q", isErr, text)
			}
			if got := h.upstreamCalls()["refund_customer"]; got != before {
				t.Fatalf("upstream received %d refunds, want %d: the changed pin must stop the approved call", got, before)
			}
			if hold, _ := h.ledger.GetHold(id); hold.State != ledger.HoldApproved {
				t.Fatalf("the approval was spent on a call that did not run: %s", hold.State)
			}
			// The new hold shows the value read, and stands for the pin too.
			nh, ok := h.ledger.GetHold(holdID(text))
			if !ok || nh.ObservedPin != tt.pinAfter || !strings.Contains(nh.Cause, "pin") {
				t.Fatalf("new hold %+v", nh)
			}
		})
	}
}

// TestApprovalEachHoldObeysMaxCallsAndOrder: an approval = "each" hold
// lifts the approval only; max_calls and the order still apply, also on a
// plan with on_violation = "hold".
func TestApprovalEachHoldObeysMaxCallsAndOrder(t *testing.T) {
	for _, onViolation := range []string{"block", "hold"} {
		t.Run("max_calls/on_violation="+onViolation, func(t *testing.T) {
			src := strings.Replace(anyOrder(refundPlan), `goal = `, `on_violation = "`+onViolation+`"
  goal = `, 1)
			h := newHarness(t, src, harnessOpts{})
			a1 := `{"to":"customer-4711@example.com","body":"one"}`
			a2 := `{"to":"customer-4711@example.com","body":"two"}`
			t1, _ := h.call("send_email", a1)
			t2, _ := h.call("send_email", a2)
			h.approve(t1)
			h.approve(t2)
			if text, isErr := h.call("send_email", a1); isErr {
				t.Fatalf("first approved call: %q", text)
			}
			text, isErr := h.call("send_email", a2)
			want := `blocked by plan "refund-4711": step "email": max_calls 1 used up`
			if onViolation == "hold" {
				want = `held: step "email": max_calls 1 used up`
			}
			if !isErr || !strings.HasPrefix(text, want) {
				t.Fatalf("second approved call: %v %q, want %q", isErr, text, want)
			}
			if got := h.upstreamCalls()["send_email"]; got != 1 {
				t.Fatalf("upstream received %d emails, want 1", got)
			}
			if onViolation == "hold" {
				// The new hold stands for the bound and the approval; approved,
				// the call runs once past max_calls.
				nh, _ := h.ledger.GetHold(holdID(text))
				if nh.Cause != "violation:max_calls,approval" {
					t.Fatalf("new hold cause %q", nh.Cause)
				}
				h.approve(text)
				if text, isErr := h.call("send_email", a2); isErr {
					t.Fatalf("approved over-limit call: %q", text)
				}
				if got := h.upstreamCalls()["send_email"]; got != 2 {
					t.Fatalf("upstream received %d emails, want 2", got)
				}
			}
		})
	}
	t.Run("order", func(t *testing.T) {
		h := newHarness(t, strings.Replace(refundPlan, `goal = `, `on_violation = "hold"
  goal = `, 1), harnessOpts{})
		// Sequential: the email step is not allowed before lookup and refund.
		args := `{"to":"customer-4711@example.com","body":"early"}`
		text, _ := h.call("send_email", args)
		nh, _ := h.ledger.GetHold(holdID(text))
		if nh.Cause != "violation:order,approval" {
			t.Fatalf("hold cause %q (%q)", nh.Cause, text)
		}
		// An approval-only hold for the same call (as a plan without
		// on_violation = "hold" would have made) does not lift the order.
		h2 := newHarness(t, strings.Replace(refundPlan, `goal = `, `on_violation = "hold"
  goal = `, 1), harnessOpts{})
		c := ledger.Call{PlanDigest: h2.plan.Digest, Step: "email", StepIndex: 2, Tool: "send_email", Args: []byte(args)}
		old, err := h2.ledger.NewHold(h2.ctx, c, ledger.HoldSpec{Reason: "approval", Cause: "approval", Expires: h2.proxy.cfg.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h2.ledger.UpdateHold(h2.ctx, old.ID, ledger.HoldUpdate{State: ledger.HoldApproved}); err != nil {
			t.Fatal(err)
		}
		text, isErr := h2.call("send_email", args)
		if !isErr || !strings.HasPrefix(text, `held: step "email" is not allowed yet`) || holdID(text) == old.ID {
			t.Fatalf("approval-only hold: %v %q", isErr, text)
		}
		if got := h2.upstreamCalls()["send_email"]; got != 0 {
			t.Fatalf("upstream received %d emails", got)
		}
	})
}

// TestViolationHoldLiftsOnlyItsRule: a hold approved for a max_calls
// violation lets that call past max_calls, not past the order: once the
// plan moved on, the same call is held again for the order.
func TestViolationHoldLiftsOnlyItsRule(t *testing.T) {
	src := strings.Replace(strings.Replace(refundPlan, `goal = `, `on_violation = "hold"
  goal = `, 1), `approval = "each"`, "", 1)
	h := newHarness(t, src, harnessOpts{})
	if text, isErr := h.call("get_order", `{"order_id":"4711"}`); isErr {
		t.Fatal(text)
	}
	if text, isErr := h.call("refund_customer", `{"order_id":"4711","amount":5,"currency":"EUR"}`); isErr {
		t.Fatal(text)
	}
	second := `{"order_id":"4711","amount":6,"currency":"EUR"}`
	text, _ := h.call("refund_customer", second)
	if !strings.HasPrefix(text, `held: step "refund": max_calls 1 used up`) {
		t.Fatalf("second refund: %q", text)
	}
	id := h.approve(text)
	// The plan moves on: the refund step is closed for good.
	if text, isErr := h.call("send_email", `{"to":"customer-4711@example.com","body":"refunded"}`); isErr {
		t.Fatal(text)
	}
	text, isErr := h.call("refund_customer", second)
	if !isErr || !strings.HasPrefix(text, `held: step "refund" is closed`) || holdID(text) == id {
		t.Fatalf("approved max_calls hold after the plan moved on: %v %q", isErr, text)
	}
	if got := h.upstreamCalls()["refund_customer"]; got != 1 {
		t.Fatalf("upstream received %d refunds, want 1", got)
	}
	nh, _ := h.ledger.GetHold(holdID(text))
	if nh.Cause != "violation:order,violation:max_calls" {
		t.Fatalf("new hold cause %q", nh.Cause)
	}
}

// TestParallelIdenticalCallsSpendOneApproval: an approved hold is consumed
// by exactly one of many identical parallel calls; the others are decided
// again on the new state and held for a new approval.
func TestParallelIdenticalCallsSpendOneApproval(t *testing.T) {
	h := newHarness(t, strings.Replace(anyOrder(refundPlan), `approval = "each"`, `approval = "each"
    max_calls = 50`, 1), harnessOpts{})
	args := `{"to":"customer-4711@example.com","body":"once"}`
	text, _ := h.call("send_email", args)
	id := h.approve(text)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ran, held := 0, 0
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			text, isErr := h.call("send_email", args)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case !isErr:
				ran++
			case strings.HasPrefix(text, `held: step "email" needs a human approval for each call`) && holdID(text) != id:
				held++
			default:
				t.Errorf("unexpected answer: %q", text)
			}
		}()
	}
	wg.Wait()
	if ran != 1 || held != 19 {
		t.Fatalf("%d ran, %d held; want 1 and 19", ran, held)
	}
	if got := h.upstreamCalls()["send_email"]; got != 1 {
		t.Fatalf("upstream received %d emails, want 1", got)
	}
	h.verifyAudit()
}
