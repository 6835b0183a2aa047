package gate_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/proxy/gate"
)

// progress is the state's view the gate reads: here nothing has run yet.
type progress struct{ calls map[int]int }

func (p progress) Current() int    { return 0 }
func (p progress) Done(i int) bool { return p.calls[i] > 0 }
func (p progress) Calls(i int) int { return p.calls[i] }

// Deciding calls against a plan, without I/O: the same decision the proxy
// makes before it counts and forwards a call.
func ExampleGate_Decide() {
	plan, diags := hclplan.Parse("refund.hcl", []byte(`
plan "refund" {
  goal = "refund order 4711"
  step "refund" {
    tool = "refund_customer"
    arg "order_id" { eq = "4711" }
    arg "amount"   { max = 30 }
  }
}
`))
	if diags.HasErrors() {
		fmt.Println(diags)
		return
	}
	g := gate.New(plan)
	// Arguments as the proxy decodes them: numbers as json.Number.
	for _, args := range []map[string]any{
		{"order_id": "4711", "amount": json.Number("25")},
		{"order_id": "4711", "amount": json.Number("300")},
		{"order_id": "4712", "amount": json.Number("5")},
	} {
		d := g.Decide(gate.Input{Now: time.Now(), Tool: "refund_customer", Args: args, Progress: progress{}})
		switch d.Kind {
		case gate.KindForward:
			fmt.Printf("forward as step %q\n", d.Forward.Step.Name)
		case gate.KindBlock:
			fmt.Printf("block (%s): %s\n", d.Block.Rule, d.Block.Reason)
		case gate.KindHold:
			fmt.Printf("hold: %v\n", d.Hold.Causes)
		}
	}
	// Output:
	// forward as step "refund"
	// block (args): step "refund": argument "amount" = 300 is above the maximum 30
	// block (args): step "refund": argument "order_id" = "4712", want "4711"
}

// Deciding the other requests a plan governs: a read counted per resource
// block, a read of a URI no block allows, and a subscription (not counted).
func ExampleGate_DecideOp() {
	plan, diags := hclplan.Parse("docs.hcl", []byte(`
plan "docs" {
  goal = "read the architecture document twice"
  resource "architecture" {
    uri       = "demo://doc/architecture.md"
    max_reads = 2
  }
}
`))
	if diags.HasErrors() {
		fmt.Println(diags)
		return
	}
	g := gate.New(plan)
	used := progress{calls: map[int]int{}}
	for _, in := range []gate.OpInput{
		{Op: gate.OpRead, Name: "demo://doc/architecture.md"},
		{Op: gate.OpRead, Name: "demo://doc/architecture.md"},
		{Op: gate.OpRead, Name: "demo://doc/architecture.md"},
		{Op: gate.OpRead, Name: "file:///etc/passwd"},
		{Op: gate.OpSubscribe, Name: "demo://doc/architecture.md"},
	} {
		in.Now, in.Progress = time.Now(), used
		d := g.DecideOp(in)
		switch {
		case d.Allowed && d.Count != nil:
			used.calls[d.Count.Index]++ // the state takes the count durably
			fmt.Printf("%s: allowed, counted as %s\n", in.Op, d.Count.Step())
		case d.Allowed:
			fmt.Printf("%s: allowed\n", in.Op)
		default:
			fmt.Printf("%s: refused (%s): %s\n", in.Op, d.Rule, d.Reason)
		}
	}
	// Output:
	// resources/read: allowed, counted as resource:architecture
	// resources/read: allowed, counted as resource:architecture
	// resources/read: refused (max_calls): resource:architecture: max_reads 2 used up (2 forwarded)
	// resources/read: refused (unplanned): resource "file:///etc/passwd" is not in plan "docs"
	// resources/subscribe: allowed
}
