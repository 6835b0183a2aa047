package proxy

import (
	"context"
	"fmt"
	"time"

	"github.com/planlock/planlock/proxy/holdreq"
	"github.com/planlock/planlock/proxy/ledger"
)

// HoldApprover decides held calls through approval pull requests;
// the hold-PR backend (internal/approvals) has it.
type HoldApprover interface {
	Decide(ctx context.Context, r holdreq.Request) holdreq.Decision
}

// holdKeeper is the one way the call path creates and looks up holds. Behind it
// sit either the durable state alone (stateHolds) or approval pull requests
// (prHolds); the call path does not know which.
type holdKeeper interface {
	// Bound is the newest hold for exactly this call (plan digest, tool,
	// canonical arguments), as the durable state has it.
	Bound(call ledger.Call) (ledger.Hold, bool)
	// Request records a hold for the call, or finds the same one again, and
	// says what to answer.
	Request(ctx context.Context, planName string, call ledger.Call, spec ledger.HoldSpec, tc *holdreq.ToolChange) holdAnswer
}

// holdOutcome is what a hold request came to.
type holdOutcome int

const (
	holdWaiting  holdOutcome = iota // answer Message; nothing is forwarded
	holdApproved                    // the hold is approved now: decide again
	holdRefused                     // block the call with Message
)

// holdAnswer is the answer to a hold request.
type holdAnswer struct {
	outcome holdOutcome
	message string
}

// holds is the proxy's hold keeper.
func (p *Proxy) holds() holdKeeper {
	if p.cfg.Approvals != nil {
		return prHolds{state: p.cfg.State, approver: p.cfg.Approvals}
	}
	return stateHolds{state: p.cfg.State}
}

// stateHolds keeps holds in the durable state only; an operator approves
// them with planlock holds.
type stateHolds struct{ state State }

func (s stateHolds) Bound(call ledger.Call) (ledger.Hold, bool) { return s.state.FindHold(call) }

func (s stateHolds) Request(ctx context.Context, _ string, call ledger.Call, spec ledger.HoldSpec, _ *holdreq.ToolChange) holdAnswer {
	h, err := s.state.NewHold(context.WithoutCancel(ctx), call, spec)
	if err != nil {
		return holdAnswer{outcome: holdWaiting, message: fmt.Sprintf("held: %s; but planlock could not record the hold (%s); the call was not forwarded", spec.Reason, stateError(err))}
	}
	if h.State == ledger.HoldApproved {
		return holdAnswer{outcome: holdApproved}
	}
	where := fmt.Sprintf("hold %s", h.ID)
	if h.PRURL != "" {
		where += ", pull request " + h.PRURL
	}
	return holdAnswer{outcome: holdWaiting, message: fmt.Sprintf("held: %s; needs approval (%s, expires %s). Ask the user to approve it (planlock holds show %s), then repeat exactly the same call.",
		spec.Reason, where, h.Expires.UTC().Format(time.RFC3339), h.ID)}
}

// prHolds turns holds into approval pull requests (package approvals): a
// new hold opens one and the call returns at once; the repeated identical
// call checks it, and a merged one whose approval signature verifies
// becomes an approved hold in the state.
type prHolds struct {
	state    State
	approver HoldApprover
}

func (s prHolds) Bound(call ledger.Call) (ledger.Hold, bool) { return s.state.FindHold(call) }

func (s prHolds) Request(ctx context.Context, planName string, call ledger.Call, spec ledger.HoldSpec, tc *holdreq.ToolChange) holdAnswer {
	d := s.approver.Decide(ctx, holdreq.Request{
		PlanName:    planName,
		Call:        call,
		Reason:      spec.Reason,
		Cause:       spec.Cause,
		ObservedPin: spec.ObservedPin,
		Expires:     spec.Expires,
		ToolChange:  tc,
	})
	switch d.Outcome {
	case holdreq.Approved:
		return holdAnswer{outcome: holdApproved}
	case holdreq.Refused:
		return holdAnswer{outcome: holdRefused, message: d.Message}
	}
	return holdAnswer{outcome: holdWaiting, message: d.Message}
}

// pinText is a pin value as a hold request records it and a pin change
// writes it into the plan: a string as itself, anything else as JSON.
func pinText(v any, canonical []byte) string {
	if s, ok := v.(string); ok {
		return s
	}
	return string(canonical)
}
