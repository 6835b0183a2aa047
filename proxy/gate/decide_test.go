package gate

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/planlock/planlock/hclplan"
)

// matrixPlan is a plan with one step before the step under test ("target"),
// so that the sequential order can fail, pass or not apply.
func matrixPlan(t testing.TB, order, onViolation, approval string, pinned bool) *hclplan.Plan {
	t.Helper()
	extra := ""
	if approval != "" {
		extra += fmt.Sprintf("    approval = %q\n", approval)
	}
	if pinned {
		extra += `    pin {
      tool  = "get_script"
      args  = { path = "f/x" }
      field = "hash"
      eq    = "abc"
    }
`
	}
	return mustParse(t, fmt.Sprintf(`
plan "matrix" {
  goal  = "matrix"
  order = %q
  on_violation = %q
  step "first" {
    tool = "a"
    arg "any" {
      any      = true
      optional = true
    }
  }
  step "target" {
    tool      = "b"
    max_calls = 1
    arg "x" { eq = 1 }
%s  }
}
`, order, onViolation, extra))
}

// TestDecideMatrix enumerates every combination of order, argument
// constraint, max_calls, approval, step on hold (on_error), on_violation,
// pin, and the bound hold's state and cause, and checks each decision
// against the rule written out below: the obstacles in the contract's
// order, each lifted only by an approved hold made for exactly it.
func TestDecideMatrix(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	vOrder, vArgs, vMax := ViolationCause(RuleOrder), ViolationCause(RuleArgs), ViolationCause(RuleMaxCalls)
	orders := []string{"any", "sequential-pass", "sequential-fail"}
	states := []HoldState{"", HoldPending, HoldApproved, HoldRejected, HoldExpired, HoldConsumed}
	causes := []string{"", "approval", "pin", "on_error", "violation:order", "violation:args", "violation:max_calls",
		"violation:order,violation:args,violation:max_calls,approval,on_error"}
	n := 0
	gates := map[string]*Gate{} // one per plan shape
	for _, order := range orders {
		for _, argsOK := range []bool{true, false} {
			for _, used := range []bool{false, true} {
				for _, each := range []bool{false, true} {
					for _, onErr := range []bool{false, true} {
						for _, onViolation := range []string{"block", "hold"} {
							for _, pinned := range []bool{false, true} {
								for _, st := range states {
									for _, cause := range causes {
										for _, withPR := range []bool{false, true} {
											if st == "" && cause != "" || st != HoldRejected && withPR {
												continue // no hold: one case; a pull request matters only to a rejected hold
											}
											n++
											planOrder := "any"
											if order != "any" {
												planOrder = "sequential"
											}
											approval := ""
											if each {
												approval = "each"
											}
											key := fmt.Sprint(planOrder, onViolation, approval, pinned)
											g := gates[key]
											if g == nil {
												g = New(matrixPlan(t, planOrder, onViolation, approval, pinned))
												gates[key] = g
											}
											pr := prog{done: map[int]bool{0: order == "sequential-pass"}, calls: map[int]int{}}
											if used {
												pr.calls[1] = 1
											}
											a := map[string]any{"x": jsonNum("1")}
											if !argsOK {
												a["x"] = jsonNum("2")
											}
											in := Input{Now: now, Tool: "b", Args: a, Progress: pr}
											if onErr {
												in.OnErrorHeld = func(i int) (string, bool) { return "step on hold after a failed call", i == 1 }
											}
											var bound *BoundHold
											if st != "" {
												bound = &BoundHold{ID: "h1", State: st, Causes: ParseCauses(cause, false), StepIndex: 1, Step: "target"}
												if withPR {
													bound.PRURL = "https://github.example/acme/plans/pull/7"
												}
												in.Hold = func() *BoundHold { return bound }
											}
											name := fmt.Sprintf("order=%s/args=%v/used=%v/each=%v/onerr=%v/onviolation=%s/pin=%v/hold=%s:%s/pr=%v",
												order, argsOK, used, each, onErr, onViolation, pinned, st, cause, withPR)

											// The rule, written out.
											var obstacles Causes
											if order == "sequential-fail" {
												obstacles = append(obstacles, vOrder)
											}
											if !argsOK {
												obstacles = append(obstacles, vArgs)
											}
											if used {
												obstacles = append(obstacles, vMax)
											}
											if each {
												obstacles = append(obstacles, CauseApproval)
											}
											if onErr {
												obstacles = append(obstacles, CauseOnError)
											}
											var lifted, remaining Causes
											for _, o := range obstacles {
												if st == HoldApproved && bound.Causes.Has(o) {
													lifted = append(lifted, o)
												} else {
													remaining = append(remaining, o)
												}
											}
											isViolation := func(c Cause) bool { return strings.HasPrefix(string(c), "violation:") }

											d := g.Decide(in)
											switch {
											case len(remaining) == 0:
												f, ok := d.Forward, d.Kind == KindForward
												if !ok {
													t.Fatalf("%s: got %#v, want Forward", name, d)
												}
												if f.Step.Name != "target" || f.PinCheck != pinned || !slices.Equal(f.Lifts, lifted) {
													t.Fatalf("%s: got %+v, want step target, pin check %v, lifts %v", name, f, pinned, lifted)
												}
												// A call with nothing to lift does not even look its hold up.
												if wantHold := st == HoldApproved && (len(obstacles) > 0 || pinned); (f.Hold != nil) != wantHold {
													t.Fatalf("%s: forward under hold %v, want %v", name, f.Hold, wantHold)
												}
												if f.Consumes(false) != (len(lifted) > 0) {
													t.Fatalf("%s: consumes %v with lifts %v", name, f.Consumes(false), lifted)
												}
											case isViolation(remaining[0]) && onViolation == "block":
												b, ok := d.Block, d.Kind == KindBlock
												if !ok || !strings.Contains(b.Reason, ruleText(remaining[0])) {
													t.Fatalf("%s: got %#v, want Block for %s", name, d, remaining[0])
												}
												if want := Rule(strings.TrimPrefix(string(remaining[0]), "violation:")); b.Rule != want {
													t.Fatalf("%s: block rule %q, want %q", name, b.Rule, want)
												}
											case st == HoldRejected && !withPR:
												b, ok := d.Block, d.Kind == KindBlock
												if !ok || !strings.Contains(b.Reason, "was rejected; do not retry it") || b.Rule != RuleRejected {
													t.Fatalf("%s: got %#v, want Block (rejected)", name, d)
												}
											case st == HoldRejected:
												// Its pull request may have been reopened: the
												// keeper is asked about the rejected hold again.
												h, ok := d.Hold, d.Kind == KindHold
												if !ok || h.Rejected != bound || !slices.Equal(h.Causes, obstacles) || h.Step == nil || h.Step.Name != "target" {
													t.Fatalf("%s: got %#v, want Hold rechecking the rejected hold", name, d)
												}
												if b := h.RejectedBlock(); !strings.Contains(b.Reason, "hold h1 for exactly this call was rejected; do not retry it") || b.Step != h.Step {
													t.Fatalf("%s: rejected block %#v", name, b)
												}
											default:
												h, ok := d.Hold, d.Kind == KindHold
												if !ok || h.Rejected != nil {
													t.Fatalf("%s: got %#v, want Hold", name, d)
												}
												if !slices.Equal(h.Causes, obstacles) || h.Step == nil || h.Step.Name != "target" {
													t.Fatalf("%s: hold causes %v step %v, want %v on target", name, h.Causes, h.Step, obstacles)
												}
												if !strings.Contains(h.Reason, ruleText(remaining[0])) {
													t.Fatalf("%s: hold reason %q does not name %s", name, h.Reason, remaining[0])
												}
											}
										}
									}
								}
							}
						}
					}
				}
			}
		}
	}
	if n != 3*2*2*2*2*2*2*(1+6*len(causes)) {
		t.Fatalf("enumerated %d cases", n)
	}
}

// ruleText is a fragment of the reason each obstacle gives.
func ruleText(c Cause) string {
	switch c {
	case ViolationCause(RuleOrder):
		return "is not allowed yet"
	case ViolationCause(RuleArgs):
		return `argument "x"`
	case ViolationCause(RuleMaxCalls):
		return "max_calls 1 used up"
	case CauseApproval:
		return "needs a human approval for each call"
	case CauseOnError:
		return "on hold after a failed call"
	}
	return string(c)
}

// TestDecideEdges covers what the matrix does not: expiry, tools in no
// step, and legacy holds.
func TestDecideEdges(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	hold := func(st HoldState, cause string) *BoundHold {
		return &BoundHold{ID: "h1", State: st, Causes: ParseCauses(cause, false), StepIndex: 1, Step: "target"}
	}
	withPR := func(h *BoundHold) *BoundHold {
		h.PRURL = "https://github.example/acme/plans/pull/7"
		return h
	}
	expired := mustParse(t, `
plan "old" {
  goal    = "expired"
  expires = "2026-01-01T00:00:00Z"
  on_violation = "hold"
  step "s" { tool = "b" }
}`)
	tests := []struct {
		name string
		plan *hclplan.Plan
		tool string
		hold *BoundHold
		want string // %T of the decision and a fragment of its reason
	}{
		{"expired plan blocks even with an approved hold", expired, "b", hold(HoldApproved, "violation:args,approval"), "gate.Block: expired"},
		{"unplanned blocks", matrixPlan(t, "any", "block", "", false), "zz", nil, `gate.Block: tool "zz" is not in plan`},
		{"unplanned holds under on_violation hold", matrixPlan(t, "any", "hold", "", false), "zz", nil, `gate.Hold: tool "zz" is not in plan`},
		{"unplanned approved still blocks", matrixPlan(t, "any", "hold", "", false), "zz", hold(HoldApproved, "violation:unplanned"), "gate.Block: it needs a new plan"},
		{"unplanned rejected blocks", matrixPlan(t, "any", "hold", "", false), "zz", hold(HoldRejected, "violation:unplanned"), "gate.Block: was rejected"},
		{"unplanned rejected with a pull request asks again", matrixPlan(t, "any", "hold", "", false), "zz", withPR(hold(HoldRejected, "violation:unplanned")), `gate.Hold: tool "zz" is not in plan`},
		{"legacy approved hold lifts approval", matrixPlan(t, "any", "hold", "each", false), "b", hold(HoldApproved, ""), "gate.Forward: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := Input{Now: now, Tool: tt.tool, Args: map[string]any{"x": jsonNum("1")}, Progress: prog{}}
			if tt.hold != nil {
				in.Hold = func() *BoundHold { return tt.hold }
			}
			if tt.tool == "zz" {
				in.Args = map[string]any{}
			}
			d := New(tt.plan).Decide(in)
			reason, kind := "", ""
			switch d.Kind {
			case KindBlock:
				reason, kind = d.Block.Reason, "gate.Block"
				if d.Block.Rule == "" {
					t.Fatalf("block %q names no rule", reason)
				}
			case KindHold:
				reason, kind = d.Hold.Reason, "gate.Hold"
			case KindForward:
				kind = "gate.Forward"
			}
			got := kind + ": " + reason
			kind, frag, _ := strings.Cut(tt.want, ": ")
			if !strings.HasPrefix(got, kind) || !strings.Contains(reason, frag) {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
			if rejected := tt.hold != nil && tt.hold.State == HoldRejected; d.Kind == KindHold && (d.Hold.Rejected != nil) != rejected {
				t.Fatalf("hold decision rechecks %v, want %v", d.Hold.Rejected, rejected)
			}
		})
	}
}

func TestParseCauses(t *testing.T) {
	tests := []struct {
		in      string
		onError bool
		want    Causes
	}{
		{"", false, Causes{CauseApproval}},
		{"", true, Causes{CauseOnError}},
		{"approval,pin", false, Causes{CauseApproval, CausePin}},
		{"pin,pin,,violation:args", false, Causes{CausePin, ViolationCause(RuleArgs)}},
	}
	for _, tt := range tests {
		if got := ParseCauses(tt.in, tt.onError); !slices.Equal(got, tt.want) {
			t.Errorf("ParseCauses(%q, %v) = %v, want %v", tt.in, tt.onError, got, tt.want)
		}
	}
	if s := (Causes{CauseApproval, CausePin}).String(); s != "approval,pin" {
		t.Errorf("String = %q", s)
	}
}

// TestForwardPin: the pin value an approved hold lets through is exactly
// the one its approver saw, and only for a hold made for the pin.
func TestForwardPin(t *testing.T) {
	tests := []struct {
		name     string
		hold     *BoundHold
		lifts    Causes
		observed string
		accepts  bool
	}{
		{"no hold", nil, nil, "x", false},
		{"pin hold, same value", &BoundHold{Causes: Causes{CausePin}, ObservedPin: "x"}, nil, "x", true},
		{"pin hold, other value", &BoundHold{Causes: Causes{CausePin}, ObservedPin: "x"}, nil, "y", false},
		{"pin hold, nothing observed", &BoundHold{Causes: Causes{CausePin}}, nil, "", false},
		{"approval hold that saw the value", &BoundHold{Causes: Causes{CauseApproval}, ObservedPin: "x"}, Causes{CauseApproval}, "x", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Forward{Hold: tt.hold, Lifts: tt.lifts, Needs: Causes{CauseApproval}}
			if got := f.PinAccepts(tt.observed); got != tt.accepts {
				t.Fatalf("PinAccepts = %v, want %v", got, tt.accepts)
			}
			if f.Consumes(tt.accepts) != (tt.hold != nil && (len(tt.lifts) > 0 || tt.accepts)) {
				t.Fatalf("Consumes wrong")
			}
			h := f.PinHold("pin changed")
			if !slices.Equal(h.Causes, Causes{CauseApproval, CausePin}) || h.Reason != "pin changed" {
				t.Fatalf("PinHold = %+v", h)
			}
		})
	}
}

// TestRecheckLifted: a consumed hold lifts order and max_calls at the count
// only when it was made for them.
func TestRecheckLifted(t *testing.T) {
	plan := matrixPlan(t, "sequential", "hold", "", false)
	g := New(plan)
	s := plan.Steps[1]
	p := prog{calls: map[int]int{1: 1}, done: map[int]bool{}}
	tests := []struct {
		lifted Causes
		want   Rule
	}{
		{nil, RuleOrder},
		{Causes{ViolationCause(RuleOrder)}, RuleMaxCalls},
		{Causes{ViolationCause(RuleMaxCalls)}, RuleOrder},
		{Causes{ViolationCause(RuleOrder), ViolationCause(RuleMaxCalls)}, ""},
		{Causes{CauseApproval}, RuleOrder},
	}
	for _, tt := range tests {
		f := g.RecheckLifted(s, p, tt.lifted)
		got := Rule("")
		if f != nil {
			got = f.Rule
		}
		if got != tt.want {
			t.Errorf("lifted %v: got %q, want %q", tt.lifted, got, tt.want)
		}
	}
}

// BenchmarkGateDecide is the call path's whole decision for an allowed call
// (Check plus the approval and hold look-ups), to compare with BenchmarkCheck.
func BenchmarkGateDecide(b *testing.B) {
	g := New(mustParse(b, refundPlan))
	a := args(b, `{"order_id":"4711","amount":29.5,"currency":"EUR","note":"late delivery"}`)
	p := prog{cur: 0, done: map[int]bool{0: true}, calls: map[int]int{0: 1}}
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	held := func(int) (string, bool) { return "", false }
	hold := func() *BoundHold { return nil }
	b.ReportAllocs()
	for b.Loop() {
		if d := g.Decide(Input{Now: now, Tool: "refund_customer", Args: a, Progress: p, OnErrorHeld: held, Hold: hold}); d.Kind != KindForward {
			b.Fatal("not forwarded")
		}
	}
}

func jsonNum(s string) json.Number { return json.Number(s) }

// TestPlainCallLooksUpNoHold: a call with nothing for a human to lift
// (checks pass, no approval, no pin, step not on hold) is forwarded without
// looking its hold up; any other call looks it up.
func TestPlainCallLooksUpNoHold(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		plan     *hclplan.Plan
		x        string
		onErr    bool
		wantLook bool
	}{
		{"plain", matrixPlan(t, "any", "block", "", false), "1", false, false},
		{"argument violation", matrixPlan(t, "any", "hold", "", false), "2", false, true},
		{"approval each", matrixPlan(t, "any", "block", "each", false), "1", false, true},
		{"pinned", matrixPlan(t, "any", "block", "", true), "1", false, true},
		{"on hold after a failure", matrixPlan(t, "any", "block", "", false), "1", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			looked := false
			in := Input{Now: now, Tool: "b", Args: map[string]any{"x": jsonNum(tt.x)}, Progress: prog{},
				OnErrorHeld: func(int) (string, bool) { return "on hold after a failed call", tt.onErr },
				Hold:        func() *BoundHold { looked = true; return nil }}
			New(tt.plan).Decide(in)
			if looked != tt.wantLook {
				t.Fatalf("looked up the hold: %v, want %v", looked, tt.wantLook)
			}
		})
	}
}
