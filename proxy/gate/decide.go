package gate

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/planlock/planlock/hclplan"
)

// Cause is one reason a call needs a human before it may run. A hold
// records the causes it was made for, and consuming an approved hold lifts
// exactly those, nothing else.
type Cause string

// Causes. A violation cause names the rule: "violation:order",
// "violation:args", "violation:max_calls", "violation:unplanned".
const (
	CauseApproval Cause = "approval" // the step has approval = "each"
	CausePin      Cause = "pin"      // the pin read differs from the plan (or failed)
	CauseOnError  Cause = "on_error" // the step is on hold after a failed call
)

// ViolationCause is the cause of a hold made for a broken rule under
// on_violation = "hold".
func ViolationCause(r Rule) Cause { return Cause(violationPrefix + string(r)) }

const violationPrefix = "violation:"

// rule is the rule of a violation cause ("" for the other causes).
func (c Cause) rule() Rule {
	r, ok := strings.CutPrefix(string(c), violationPrefix)
	if !ok {
		return ""
	}
	return Rule(r)
}

// Causes is a set of causes, in the contract's order of the checks.
type Causes []Cause

// String is the set as the ledger stores it: comma-separated.
func (c Causes) String() string {
	s := make([]string, len(c))
	for i, x := range c {
		s[i] = string(x)
	}
	return strings.Join(s, ",")
}

// Has reports whether x is in the set.
func (c Causes) Has(x Cause) bool { return slices.Contains(c, x) }

// First is the first cause, "" when there is none.
func (c Causes) First() string {
	if len(c) == 0 {
		return ""
	}
	return string(c[0])
}

// ParseCauses reads a stored cause set. A hold recorded before causes were
// ("") stands for an approval only, so its approval lifts nothing else;
// onErrorLegacy says its reason marks it as an on_error hold of that time
// (the only other cause the reason tells exactly).
func ParseCauses(s string, onErrorLegacy bool) Causes {
	if s == "" {
		if onErrorLegacy {
			return Causes{CauseOnError}
		}
		return Causes{CauseApproval}
	}
	var out Causes
	for _, x := range strings.Split(s, ",") {
		if x != "" && !out.Has(Cause(x)) {
			out = append(out, Cause(x))
		}
	}
	return out
}

// HoldState is the state of the hold bound to a call (the ledger's states).
type HoldState string

// Hold states; an expired or consumed hold binds to nothing any more.
const (
	HoldPending  HoldState = "pending"
	HoldApproved HoldState = "approved"
	HoldRejected HoldState = "rejected"
	HoldExpired  HoldState = "expired"
	HoldConsumed HoldState = "consumed"
)

// BoundHold is the newest hold for exactly this call (plan digest, tool,
// canonical arguments).
type BoundHold struct {
	ID          string
	State       HoldState
	Causes      Causes
	StepIndex   int    // the step it was made for
	Step        string // that step's name
	ObservedPin string // the pin value shown to the approver ("" none)
	// PRURL is the hold's approval pull request ("" when it has none that
	// can be reopened): a rejected hold that has one may come back when a
	// person reopens it.
	PRURL string
}

// Input is everything Decide looks at.
type Input struct {
	Now  time.Time
	Tool string
	// Args is the decoded arguments object (numbers as json.Number).
	Args     map[string]any
	Progress Progress
	// OnErrorHeld says whether step i is on hold after a failed call, and
	// why; nil means no step is.
	OnErrorHeld func(i int) (reason string, held bool)
	// ToolChanged says whether the upstream's definition of tool differs
	// from the plan's tool_pin (or could not be checked), and how; nil
	// means every definition is as pinned.
	ToolChanged func(tool string) (why string, changed bool)
	// Hold returns the hold bound to this call (nil when there is none).
	// Decide calls it only for a call that may need a human (a failed
	// check, approval = "each", a pinned step, steps on hold), so that a
	// plain allowed call costs no hold look-up. Nil means no hold.
	Hold func() *BoundHold
}

// Kind says which outcome a Decision is.
type Kind int

// Kinds of decision.
const (
	KindBlock Kind = iota + 1
	KindHold
	KindForward
)

// Decision is one of Block, Hold or Forward: Kind says which field holds
// it. (A struct rather than an interface, so that deciding allocates
// nothing on the call path.)
type Decision struct {
	Kind    Kind
	Block   Block
	Hold    Hold
	Forward Forward
}

func blockD(b Block) Decision     { return Decision{Kind: KindBlock, Block: b} }
func holdD(h Hold) Decision       { return Decision{Kind: KindHold, Hold: h} }
func forwardD(f Forward) Decision { return Decision{Kind: KindForward, Forward: f} }

// Block: the call is refused; nothing reaches the upstream.
type Block struct {
	Step *hclplan.Step // nil when no step matched
	// Rule is the check that refused the call, a fixed set (metrics
	// count blocks by it; Reason is free text).
	Rule   Rule
	Reason string
}

// Hold: the call needs a human. Causes are every reason that has to be
// lifted for this call, the ones an older approval lifted included (the new
// hold records them all); Reason is the first one not lifted.
type Hold struct {
	Step   *hclplan.Step // nil for a tool in no step
	Causes Causes
	Reason string
	// Rejected, when set, is the rejected hold bound to the call, whose
	// pull request a person may have reopened: the act step asks the hold
	// keeper about that hold again (as recorded, not a new one) and blocks
	// with RejectedBlock unless the keeper finds its pull request reopened.
	Rejected *BoundHold
}

// RejectedBlock is the block for a Rejected hold that stays rejected.
func (h Hold) RejectedBlock() Block { return rejectedBlock(h.Step, h.Rejected) }

// Forward: the call may run once the act step has read the pin (when
// PinCheck) and taken the count. Hold, when set, is the approved hold the
// call runs under; Lifts are the causes it lifts, so it must be consumed
// with the count when Lifts is not empty (or when the pin needs its
// approval). Needs are all the causes the call met (lifted ones included),
// for a hold made if the pin read fails.
type Forward struct {
	Step     *hclplan.Step
	PinCheck bool
	Hold     *BoundHold
	Lifts    Causes
	Needs    Causes
}

// Consumes reports whether the forward must consume its hold, given how the
// pin read went: pinApproved says the pin differed from the plan and only
// the hold's approval of the observed value lets the call run.
func (f Forward) Consumes(pinApproved bool) bool {
	return f.Hold != nil && (len(f.Lifts) > 0 || pinApproved)
}

// PinAccepts reports whether the hold approved the pin value observed now
// (read successfully): the approver saw exactly this value.
func (f Forward) PinAccepts(observed string) bool {
	return f.Hold != nil && f.Hold.Causes.Has(CausePin) && f.Hold.ObservedPin != "" && f.Hold.ObservedPin == observed
}

// PinHold is the decision when the pin read just before forwarding fails
// or differs and no approval covers it: a hold for everything the call
// needs, the pin included.
func (f Forward) PinHold(reason string) Hold {
	c := slices.Clone(f.Needs)
	if !c.Has(CausePin) {
		c = append(c, CausePin)
	}
	return Hold{Step: f.Step, Causes: c, Reason: reason}
}

// obstacle is one thing between the call and the upstream.
type obstacle struct {
	cause    Cause
	reason   string
	holdable bool
}

// Decide is the whole call check, without I/O: the contract's checks in
// order (plan expired → tool not in plan → order → arguments → max_calls →
// approval / step on hold), each obstacle lifted only by an approved hold
// for exactly this call that was made for it. The pin is read by the act
// step (Forward.PinCheck); the order and max_calls checks are repeated
// there, atomically with the count (Recheck).
func (g *Gate) Decide(in Input) Decision {
	p := g.plan
	if p.Expired(in.Now) {
		return blockD(Block{Rule: RuleExpired, Reason: fmt.Sprintf("plan %q expired at %s; no call is allowed", p.Name, p.Expires.UTC().Format(time.RFC3339))})
	}
	onViolation := p.OnViolation == hclplan.ViolationHold
	step, fail := g.Check(in.Now, in.Tool, in.Args, in.Progress)
	toolWhy, toolChanged := "", false
	if in.ToolChanged != nil && (fail == nil || fail.Rule != RuleUnplanned) {
		toolWhy, toolChanged = in.ToolChanged(in.Tool)
	}
	if fail == nil && step.Approval != hclplan.ApprovalEach && step.Pin == nil && !onErrorHeld(in, step) && !toolChanged {
		// Nothing for a human to lift: the hold is not looked up, so a
		// plain allowed call does not pay for it.
		return forwardD(Forward{Step: step})
	}
	hold := bound(in)
	approved := hold != nil && hold.State == HoldApproved
	var obs []obstacle
	if toolChanged {
		// First: what the agent was shown is not what the plan approved,
		// whatever else the call does.
		obs = append(obs, obstacle{cause: ViolationCause(RuleToolDefinition), reason: toolWhy, holdable: onViolation})
	}
	if fail != nil {
		if fail.Rule == RuleUnplanned {
			switch {
			case !onViolation:
				return blockD(Block{Rule: fail.Rule, Reason: fail.Reason})
			case approved:
				return blockD(Block{Rule: RuleUnplanned, Reason: fmt.Sprintf("hold %s is approved, but tool %q is in no step of the plan: it needs a new plan", hold.ID, in.Tool)})
			case hold != nil && hold.State == HoldRejected:
				return rejectedD(Hold{Causes: Causes{ViolationCause(RuleUnplanned)}, Reason: fail.Reason}, hold)
			}
			return holdD(Hold{Causes: Causes{ViolationCause(RuleUnplanned)}, Reason: fail.Reason})
		}
		step = fail.Step
		// An approved hold speaks for the step it was made for.
		if approved && hold.StepIndex >= 0 && hold.StepIndex < len(p.Steps) {
			if s := p.Steps[hold.StepIndex]; s.Name == hold.Step && s.Tool == in.Tool {
				step = s
			}
		}
		for _, f := range g.violations(step, in.Args, in.Progress) {
			obs = append(obs, obstacle{cause: ViolationCause(f.Rule), reason: f.Reason, holdable: onViolation})
		}
		if len(obs) == 0 { // the hold's step passes on its own
			obs = append(obs, obstacle{cause: ViolationCause(fail.Rule), reason: fail.Reason, holdable: onViolation})
		}
	}
	if step.Approval == hclplan.ApprovalEach {
		obs = append(obs, obstacle{cause: CauseApproval, reason: fmt.Sprintf("step %q needs a human approval for each call", step.Name), holdable: true})
	}
	if in.OnErrorHeld != nil {
		if why, held := in.OnErrorHeld(step.Index); held {
			obs = append(obs, obstacle{cause: CauseOnError, reason: why, holdable: true})
		}
	}

	var lifts, needs Causes
	var first *obstacle
	for i := range obs {
		o := &obs[i]
		needs = append(needs, o.cause)
		if o.cause == ViolationCause(RuleToolDefinition) && approved && hold.Causes.Has(o.cause) {
			// An approval does not accept a definition for one call: the
			// new definition is accepted by a new plan with its tool_pin.
			return blockD(Block{Step: step, Rule: RuleToolDefinition, Reason: fmt.Sprintf("hold %s is approved, but %s; the new definition needs a new plan with its tool_pin", hold.ID, toolWhy)})
		}
		if approved && hold.Causes.Has(o.cause) {
			lifts = append(lifts, o.cause)
			continue
		}
		if first == nil {
			first = o
		}
	}
	if first == nil {
		f := Forward{Step: step, PinCheck: step.Pin != nil, Lifts: lifts, Needs: needs}
		if approved {
			f.Hold = hold
		}
		return forwardD(f)
	}
	if !first.holdable {
		return blockD(Block{Step: step, Rule: first.cause.rule(), Reason: first.reason})
	}
	if hold != nil && hold.State == HoldRejected {
		return rejectedD(Hold{Step: step, Causes: needs, Reason: first.reason}, hold)
	}
	return holdD(Hold{Step: step, Causes: needs, Reason: first.reason})
}

// rejectedD decides a call whose bound hold is rejected: blocked for good,
// unless the hold has a pull request, which a person can reopen (GitHub
// lets anyone with write access do so); then the hold keeper is asked
// again, which is I/O, so the decision is a Hold marked Rejected.
func rejectedD(h Hold, rejected *BoundHold) Decision {
	if rejected.PRURL == "" {
		return blockD(rejectedBlock(h.Step, rejected))
	}
	h.Rejected = rejected
	return holdD(h)
}

func onErrorHeld(in Input, s *hclplan.Step) bool {
	if in.OnErrorHeld == nil {
		return false
	}
	_, held := in.OnErrorHeld(s.Index)
	return held
}

// bound is the hold bound to the call, or nil when there is none or it is
// expired or consumed (it binds to nothing any more).
func bound(in Input) *BoundHold {
	if in.Hold == nil {
		return nil
	}
	h := in.Hold()
	if h != nil && h.State != HoldPending && h.State != HoldApproved && h.State != HoldRejected {
		return nil
	}
	return h
}

func rejectedBlock(step *hclplan.Step, h *BoundHold) Block {
	return Block{Step: step, Rule: RuleRejected, Reason: fmt.Sprintf("hold %s for exactly this call was rejected; do not retry it", h.ID)}
}

// violations are all the rules step s breaks for this call, in the
// contract's order (order, arguments, max_calls).
func (g *Gate) violations(s *hclplan.Step, args map[string]any, prog Progress) []*Failure {
	var out []*Failure
	if f := g.orderAllows(s, prog); f != nil {
		out = append(out, f)
	}
	if err := s.Check(args); err != nil {
		out = append(out, &Failure{Rule: RuleArgs, Step: s, Reason: err.Error()})
	}
	if prog.Calls(s.Index) >= s.MaxCalls {
		out = append(out, maxCallsFailure(s, prog))
	}
	return out
}

// RecheckLifted is Recheck for a call running under an approved hold: the
// order and max_calls rules the hold lifts are not checked again.
func (g *Gate) RecheckLifted(s *hclplan.Step, prog Progress, lifted Causes) *Failure {
	if !lifted.Has(ViolationCause(RuleOrder)) {
		if f := g.orderAllows(s, prog); f != nil {
			return f
		}
	}
	if !lifted.Has(ViolationCause(RuleMaxCalls)) && prog.Calls(s.Index) >= s.MaxCalls {
		return maxCallsFailure(s, prog)
	}
	return nil
}
