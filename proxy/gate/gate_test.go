package gate

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/planlock/planlock/hclplan"
)

// prog is a Progress written out by hand.
type prog struct {
	cur   int
	done  map[int]bool
	calls map[int]int
}

func (p prog) Current() int    { return p.cur }
func (p prog) Done(i int) bool { return p.done[i] }
func (p prog) Calls(i int) int { return p.calls[i] }

const refundPlan = `
plan "refund-4711" {
  goal    = "Refund order 4711"
  expires = "2026-12-31T23:59:59Z"

  step "lookup" {
    tool      = "get_order"
    max_calls = 3
    arg "order_id" { eq = "4711" }
  }
  step "refund" {
    tool = "refund_customer"
    arg "order_id" { eq = "4711" }
    arg "amount" {
      min = 1
      max = 30
    }
    arg "currency" { enum = ["EUR"] }
    arg "note" {
      max_length = 200
      optional   = true
    }
  }
  step "close" {
    tool = "close_ticket"
    arg "ticket_id" { eq = "T-4711" }
  }
}
`

// Two steps on one tool: the first matching, eligible step with calls left wins.
const twoStepsPlan = `
plan "two" {
  goal  = "two lookups"
  order = "any"
  step "a" {
    tool = "get_order"
    arg "order_id" { eq = "1" }
  }
  step "b" {
    tool      = "get_order"
    max_calls = 2
    arg "order_id" { enum = ["1", "2"] }
  }
}
`

func mustParse(t testing.TB, src string) *hclplan.Plan {
	t.Helper()
	p, diags := hclplan.Parse("plan.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatalf("parse: %v", diags)
	}
	return p
}

func args(t testing.TB, s string) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCheck(t *testing.T) {
	before := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	after := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	fresh := prog{}
	lookedUp := prog{cur: 0, done: map[int]bool{0: true}, calls: map[int]int{0: 1}}
	refunded := prog{cur: 1, done: map[int]bool{0: true, 1: true}, calls: map[int]int{0: 1, 1: 1}}
	refundFailed := prog{cur: 1, done: map[int]bool{0: true}, calls: map[int]int{0: 1, 1: 1}}
	closedOnly := prog{cur: 2, done: map[int]bool{0: true, 1: true, 2: true}, calls: map[int]int{0: 1, 1: 1, 2: 1}}
	lookupsUsed := prog{cur: 0, done: map[int]bool{0: true}, calls: map[int]int{0: 3}}
	goodRefund := `{"order_id":"4711","amount":30.0,"currency":"EUR"}`

	tests := []struct {
		name     string
		plan     string
		now      time.Time
		tool     string
		args     string
		prog     prog
		wantStep string
		wantRule Rule
		wantMsg  string
	}{
		{name: "allowed first step", plan: refundPlan, now: before, tool: "get_order", args: `{"order_id":"4711"}`, prog: fresh, wantStep: "lookup"},
		{name: "expired plan blocks before anything", plan: refundPlan, now: after, tool: "get_order", args: `{"order_id":"4711"}`, prog: fresh,
			wantRule: RuleExpired, wantMsg: `plan "refund-4711" expired at 2026-12-31T23:59:59Z; no call is allowed`},
		{name: "expiry instant itself is expired", plan: refundPlan, now: time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC), tool: "get_order", args: `{"order_id":"4711"}`, prog: fresh,
			wantRule: RuleExpired, wantMsg: `plan "refund-4711" expired at 2026-12-31T23:59:59Z; no call is allowed`},
		{name: "unplanned tool", plan: refundPlan, now: before, tool: "delete_everything", args: `{}`, prog: fresh,
			wantRule: RuleUnplanned, wantMsg: `tool "delete_everything" is not in plan "refund-4711"`},
		{name: "later step before earlier is done", plan: refundPlan, now: before, tool: "refund_customer", args: goodRefund, prog: fresh,
			wantRule: RuleOrder, wantMsg: `step "refund" is not allowed yet: step "lookup" needs a successful call first`},
		{name: "order is checked before arguments", plan: refundPlan, now: before, tool: "refund_customer", args: `{"amount":5000}`, prog: fresh,
			wantRule: RuleOrder, wantMsg: `step "refund" is not allowed yet: step "lookup" needs a successful call first`},
		{name: "next step after done", plan: refundPlan, now: before, tool: "refund_customer", args: goodRefund, prog: lookedUp, wantStep: "refund"},
		{name: "skipping a step that is not done", plan: refundPlan, now: before, tool: "close_ticket", args: `{"ticket_id":"T-4711"}`, prog: lookedUp,
			wantRule: RuleOrder, wantMsg: `step "close" is not allowed yet: step "refund" needs a successful call first`},
		{name: "failed call does not make a step done", plan: refundPlan, now: before, tool: "close_ticket", args: `{"ticket_id":"T-4711"}`, prog: refundFailed,
			wantRule: RuleOrder, wantMsg: `step "close" is not allowed yet: step "refund" needs a successful call first`},
		{name: "closed earlier step", plan: refundPlan, now: before, tool: "get_order", args: `{"order_id":"4711"}`, prog: closedOnly,
			wantRule: RuleOrder, wantMsg: `step "lookup" is closed: the plan has moved on to step "close"`},
		{name: "chain done", plan: refundPlan, now: before, tool: "close_ticket", args: `{"ticket_id":"T-4711"}`, prog: refunded, wantStep: "close"},
		{name: "amount above max", plan: refundPlan, now: before, tool: "refund_customer", args: `{"order_id":"4711","amount":30.01,"currency":"EUR"}`, prog: lookedUp,
			wantRule: RuleArgs, wantMsg: `step "refund": argument "amount" = 30.01 is above the maximum 30`},
		{name: "wrong eq", plan: refundPlan, now: before, tool: "get_order", args: `{"order_id":"4712"}`, prog: fresh,
			wantRule: RuleArgs, wantMsg: `step "lookup": argument "order_id" = "4712", want "4711"`},
		{name: "enum", plan: refundPlan, now: before, tool: "refund_customer", args: `{"order_id":"4711","amount":3,"currency":"USD"}`, prog: lookedUp,
			wantRule: RuleArgs, wantMsg: `step "refund": argument "currency" = "USD", want one of ["EUR"]`},
		{name: "undeclared argument", plan: refundPlan, now: before, tool: "get_order", args: `{"order_id":"4711","force":true}`, prog: fresh,
			wantRule: RuleArgs, wantMsg: `step "lookup": argument "force" is not allowed by the plan`},
		{name: "missing argument", plan: refundPlan, now: before, tool: "get_order", args: `{}`, prog: fresh,
			wantRule: RuleArgs, wantMsg: `step "lookup": argument "order_id" is required`},
		{name: "max_calls used up", plan: refundPlan, now: before, tool: "get_order", args: `{"order_id":"4711"}`, prog: lookupsUsed,
			wantRule: RuleMaxCalls, wantMsg: `step "lookup": max_calls 3 used up (3 calls forwarded)`},
		{name: "arguments are checked before max_calls", plan: refundPlan, now: before, tool: "get_order", args: `{"order_id":"1"}`, prog: lookupsUsed,
			wantRule: RuleArgs, wantMsg: `step "lookup": argument "order_id" = "1", want "4711"`},
		{name: "two steps: first match wins", plan: twoStepsPlan, now: before, tool: "get_order", args: `{"order_id":"1"}`, prog: fresh, wantStep: "a"},
		{name: "two steps: first used up, second matches", plan: twoStepsPlan, now: before, tool: "get_order", args: `{"order_id":"1"}`, prog: prog{calls: map[int]int{0: 1}}, wantStep: "b"},
		{name: "two steps: only second matches", plan: twoStepsPlan, now: before, tool: "get_order", args: `{"order_id":"2"}`, prog: fresh, wantStep: "b"},
		{name: "two steps: no match reports first step", plan: twoStepsPlan, now: before, tool: "get_order", args: `{"order_id":"3"}`, prog: fresh,
			wantRule: RuleArgs, wantMsg: `step "a": argument "order_id" = "3", want "1"`},
		{name: "two steps: all used up reports first match", plan: twoStepsPlan, now: before, tool: "get_order", args: `{"order_id":"1"}`, prog: prog{calls: map[int]int{0: 1, 1: 2}},
			wantRule: RuleMaxCalls, wantMsg: `step "a": max_calls 1 used up (1 calls forwarded)`},
		{name: "order any ignores progress", plan: twoStepsPlan, now: before, tool: "get_order", args: `{"order_id":"2"}`, prog: prog{cur: 1}, wantStep: "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := New(mustParse(t, tt.plan))
			step, f := g.Check(tt.now, tt.tool, args(t, tt.args), tt.prog)
			if tt.wantStep != "" {
				if f != nil {
					t.Fatalf("blocked: %v", f)
				}
				if step.Name != tt.wantStep {
					t.Fatalf("step %q, want %q", step.Name, tt.wantStep)
				}
				return
			}
			if f == nil {
				t.Fatalf("allowed as step %q, want %s block", step.Name, tt.wantRule)
			}
			if f.Rule != tt.wantRule || f.Reason != tt.wantMsg {
				t.Fatalf("got %s %q\nwant %s %q", f.Rule, f.Reason, tt.wantRule, tt.wantMsg)
			}
		})
	}
}

func TestRecheck(t *testing.T) {
	g := New(mustParse(t, refundPlan))
	lookup := g.Plan().Steps[0]
	if f := g.Recheck(lookup, prog{calls: map[int]int{0: 2}}); f != nil {
		t.Fatalf("2 of 3 calls: %v", f)
	}
	f := g.Recheck(lookup, prog{calls: map[int]int{0: 3}})
	if f == nil || f.Rule != RuleMaxCalls {
		t.Fatalf("3 of 3 calls: got %v, want max_calls", f)
	}
	// Another call moved the plan past the step between Check and Recheck.
	f = g.Recheck(lookup, prog{cur: 1, calls: map[int]int{0: 1, 1: 1}, done: map[int]bool{0: true}})
	if f == nil || f.Rule != RuleOrder {
		t.Fatalf("moved on: got %v, want order", f)
	}
}

func TestPlanned(t *testing.T) {
	g := New(mustParse(t, refundPlan))
	for tool, want := range map[string]bool{"get_order": true, "close_ticket": true, "send_email": false, "": false} {
		if got := g.Planned(tool); got != want {
			t.Errorf("Planned(%q) = %v, want %v", tool, got, want)
		}
	}
}

// BenchmarkCheck measures the gate's own decision for an allowed call (target ≤ 2 µs).
func BenchmarkCheck(b *testing.B) {
	g := New(mustParse(b, refundPlan))
	a := args(b, `{"order_id":"4711","amount":29.5,"currency":"EUR","note":"late delivery"}`)
	p := prog{cur: 0, done: map[int]bool{0: true}, calls: map[int]int{0: 1}}
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	for b.Loop() {
		if _, f := g.Check(now, "refund_customer", a, p); f != nil {
			b.Fatal(f)
		}
	}
}
