// Package gate is the pure part of planlock's call check. Decide takes the
// plan, the clock, a decoded tool call, the plan's progress, the steps on
// hold and the hold bound to this exact call, and returns one decision:
// Block, Hold (with the causes a new hold stands for) or Forward (with
// whether the pin must be read and which approved hold the call consumes).
// It does no I/O; the proxy carries the decision out (read the pin, take
// the durable count, forward, record the outcome).
//
// The checks run in the contract's order and the first failure decides:
// plan expired → tool not in plan → (sequential) step order → argument
// constraints → max_calls → approval / step on hold. An approved hold lifts
// exactly the causes it was made for. Check is the part up to max_calls.
//
// Step selection when several steps call the same tool: among the steps that
// the order allows, the call goes to the first one (in plan order) whose
// argument constraints it satisfies and whose max_calls is not used up. When
// none is allowed by the order, the order rule blocks; when none matches, the
// first allowed step's violation is reported; when every match is used up,
// the first match's max_calls is reported.
//
// gate is a subpackage of the public package proxy: a program embedding the
// gate can decide a call without I/O (plan tests, dry runs), as
// internal/plantest does.
package gate

import (
	"fmt"
	"time"

	"github.com/planlock/planlock/hclplan"
)

// Rule names the check that failed.
type Rule string

// Rules, in the order they are checked.
const (
	RuleExpired   Rule = "expired"
	RuleUnplanned Rule = "unplanned"
	RuleOrder     Rule = "order"
	RuleArgs      Rule = "args"
	RuleMaxCalls  Rule = "max_calls"
	// RuleRejected blocks a call whose hold a person rejected.
	RuleRejected Rule = "rejected"
	// RuleToolDefinition: the upstream's definition of the tool differs
	// from the plan's tool_pin (hclplan/toolpin).
	RuleToolDefinition Rule = "tool_definition"
)

// Failure is why a call may not be forwarded: the rule and one precise line.
type Failure struct {
	Rule   Rule
	Step   *hclplan.Step // nil for expired and unplanned
	Reason string
}

func (f *Failure) Error() string { return f.Reason }

// Progress is what the gate needs of a plan's durable state.
type Progress interface {
	// Current is the index of the current step (sequential order).
	Current() int
	// Done reports whether step i had at least one successful call.
	Done(i int) bool
	// Calls is the number of calls of step i forwarded so far.
	Calls(i int) int
}

// Gate checks calls against one plan. It is safe for concurrent use.
type Gate struct {
	plan   *hclplan.Plan
	byTool map[string][]*hclplan.Step
}

// New prepares a gate for plan.
func New(plan *hclplan.Plan) *Gate {
	g := &Gate{plan: plan, byTool: map[string][]*hclplan.Step{}}
	for _, s := range plan.Steps {
		g.byTool[s.Tool] = append(g.byTool[s.Tool], s)
	}
	return g
}

// Plan returns the gate's plan.
func (g *Gate) Plan() *hclplan.Plan { return g.plan }

// Planned reports whether some step of the plan calls tool.
func (g *Gate) Planned(tool string) bool { return len(g.byTool[tool]) > 0 }

// Check runs the checks up to max_calls for a call of tool with args (a
// decoded JSON object, numbers as json.Number) and returns the step the call
// belongs to, or the first failure.
func (g *Gate) Check(now time.Time, tool string, args map[string]any, prog Progress) (*hclplan.Step, *Failure) {
	p := g.plan
	if p.Expired(now) {
		return nil, &Failure{Rule: RuleExpired, Reason: fmt.Sprintf("plan %q expired at %s; no call is allowed", p.Name, p.Expires.UTC().Format(time.RFC3339))}
	}
	steps := g.byTool[tool]
	if len(steps) == 0 {
		return nil, &Failure{Rule: RuleUnplanned, Reason: fmt.Sprintf("tool %q is not in plan %q", tool, p.Name)}
	}
	var firstEligible, firstMatch *hclplan.Step
	var firstViolation error
	var orderFail *Failure
	for _, s := range steps {
		if f := g.orderAllows(s, prog); f != nil {
			if orderFail == nil {
				orderFail = f
			}
			continue
		}
		if firstEligible == nil {
			firstEligible = s
		}
		if err := s.Check(args); err != nil {
			if firstViolation == nil {
				firstViolation = err
			}
			continue
		}
		if firstMatch == nil {
			firstMatch = s
		}
		if prog.Calls(s.Index) < s.MaxCalls {
			return s, nil
		}
	}
	switch {
	case firstMatch != nil:
		return nil, maxCallsFailure(firstMatch, prog)
	case firstEligible != nil:
		return nil, &Failure{Rule: RuleArgs, Step: firstEligible, Reason: firstViolation.Error()}
	default:
		return nil, orderFail
	}
}

// Recheck repeats the order and max_calls checks for a step already chosen
// by Check, against fresher progress: the proxy runs it atomically with the
// durable count so that concurrent calls cannot overtake each other.
func (g *Gate) Recheck(s *hclplan.Step, prog Progress) *Failure {
	if f := g.orderAllows(s, prog); f != nil {
		return f
	}
	if prog.Calls(s.Index) >= s.MaxCalls {
		return maxCallsFailure(s, prog)
	}
	return nil
}

func maxCallsFailure(s *hclplan.Step, prog Progress) *Failure {
	return &Failure{Rule: RuleMaxCalls, Step: s, Reason: fmt.Sprintf("step %q: max_calls %d used up (%d calls forwarded)", s.Name, s.MaxCalls, prog.Calls(s.Index))}
}

// orderAllows applies the sequential rule: a call may match the current
// step, or a later step when every step in between is done; steps before the
// current one are closed for good.
func (g *Gate) orderAllows(s *hclplan.Step, prog Progress) *Failure {
	if g.plan.Order == hclplan.OrderAny {
		return nil
	}
	cur := prog.Current()
	if s.Index < cur {
		return &Failure{Rule: RuleOrder, Step: s, Reason: fmt.Sprintf("step %q is closed: the plan has moved on to step %q", s.Name, g.plan.Steps[cur].Name)}
	}
	for i := cur; i < s.Index; i++ {
		if !prog.Done(i) {
			return &Failure{Rule: RuleOrder, Step: s, Reason: fmt.Sprintf("step %q is not allowed yet: step %q needs a successful call first", s.Name, g.plan.Steps[i].Name)}
		}
	}
	return nil
}
