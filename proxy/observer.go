package proxy

import (
	"context"
	"encoding/json"
	"time"
)

// CallObserver is told what became of each tools/call, for metrics and
// traces. It runs on the call path, so it must not block.
type CallObserver interface {
	// StartCall is called once per tools/call, before the gate decides;
	// the returned function is called exactly once, when the call is
	// answered. The returned context carries on through the call.
	StartCall(ctx context.Context, c CallStart) (context.Context, func(CallEnd))
}

// CallStart is a call as it arrives.
type CallStart struct {
	Plan string
	Tool string
	// Args are the call's arguments as the client sent them. An observer
	// must not export them unless its operator asked for that.
	Args json.RawMessage
}

// CallEnd is what became of a call.
type CallEnd struct {
	Step    string // the plan step it matched; "" when none did
	Outcome Outcome
	// Rule says why a call was blocked, held or not forwarded, from a small
	// fixed set (a gate rule, a hold cause, or one of the Rule* constants
	// below); "" for forwarded calls.
	Rule string
	// Upstream is the time the upstream took; zero when not forwarded.
	Upstream time.Duration
}

// Outcome is what became of a call.
type Outcome string

// Outcomes of a call.
const (
	OutcomeForwarded Outcome = "forwarded" // the upstream answered a result (a tool error included)
	OutcomeFailed    Outcome = "failed"    // forwarded and counted, but the upstream failed or timed out
	OutcomeBlocked   Outcome = "blocked"   // refused by the plan
	OutcomeHeld      Outcome = "held"      // waiting for a person's approval
	OutcomeObserved  Outcome = "observed"  // forwarded uncounted in observe mode
	OutcomeNotSent   Outcome = "not_sent"  // not forwarded, not counted: upstream down or state failing
)

// Rules of a call that did not reach the gate's verdict.
const (
	RuleUpstreamDown = "upstream_unavailable"
	RuleStateFailed  = "state_unavailable"
	RuleStateChanged = "state_changed" // decided again and again as the state moved
	RuleHoldRefused  = "hold_refused"  // the hold keeper could not take the hold
	RuleMultiRound   = "multi_round"   // a retry with inputResponses or requestState (multiround.go)
)

// callNote collects a call's CallEnd as the act step goes.
type callNote struct{ end CallEnd }

type noteKey struct{}

// startCall tells the observer about a call and puts its note in ctx.
func (p *Proxy) startCall(ctx context.Context, plan, tool string, args json.RawMessage) (context.Context, func()) {
	if p.cfg.Observer == nil {
		return ctx, func() {}
	}
	ctx, done := p.cfg.Observer.StartCall(ctx, CallStart{Plan: plan, Tool: tool, Args: args})
	n := &callNote{}
	ctx = context.WithValue(ctx, noteKey{}, n)
	return ctx, func() {
		if n.end.Outcome == "" {
			// Every path sets an outcome; this one is a bug, counted as such.
			n.end.Outcome, n.end.Rule = OutcomeNotSent, "internal"
		}
		done(n.end)
	}
}

// note records what became of the call in ctx (if it is observed). A
// later note of the same call overrides an earlier one, except that a step
// once known stays known.
func note(ctx context.Context, step string, o Outcome, rule string, upstream time.Duration) {
	n, ok := ctx.Value(noteKey{}).(*callNote)
	if !ok {
		return
	}
	if step != "" {
		n.end.Step = step
	}
	n.end.Outcome, n.end.Rule, n.end.Upstream = o, rule, upstream
}
