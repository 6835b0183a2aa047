package proxy

import (
	"context"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/proxy/approvals"
	"github.com/planlock/planlock/proxy/ledger"
)

// HoldApprover decides held calls through approval pull requests;
// *approvals.Approvals has it.
type HoldApprover interface {
	Decide(ctx context.Context, r approvals.Request) approvals.Decision
}

// holdByPR answers a held call when holds are approval pull requests: a new
// hold opens one and the call returns at once; the repeated identical call
// runs once when its approval verified (past order and max_calls only for a
// violation hold, as in hold), and is blocked when it was refused or cannot
// be checked now.
func (p *Proxy) holdByPR(ctx context.Context, req mcp.CallToolRequest, call ledger.Call, step *hclplan.Step, reason string, violation bool, observedPin string) *mcp.CallToolResult {
	d := p.cfg.Approvals.Decide(ctx, approvals.Request{
		PlanName:    p.holdPlanName(ctx),
		Call:        call,
		Reason:      reason,
		ObservedPin: observedPin,
		Expires:     p.cfg.Now().Add(p.cfg.HoldTTL),
	})
	switch d.Outcome {
	case approvals.Approved:
		if step == nil {
			return p.block(ctx, call, fmt.Sprintf("hold %s is approved, but tool %q is in no step of the plan: it needs a new plan", d.Hold.ID, call.Tool))
		}
		var seq uint64 // the audit record of the call, when it was counted (holdran.go)
		res := p.forward(withTicketSink(ctx, &seq), req, call, step, d.Hold.ID, violation)
		p.reportHoldRan(ctx, d.Hold, seq, res)
		return res
	case approvals.Refused:
		return p.block(ctx, call, d.Message)
	}
	return errorResult(d.Message)
}

// holdPlanName is the name of the plan the call was checked against.
func (p *Proxy) holdPlanName(ctx context.Context) string { return p.current(ctx).plan.Name }

// pinText is a pin value as a hold request records it and a pin change
// writes it into the plan: a string as itself, anything else as JSON.
func pinText(v any, canonical []byte) string {
	if s, ok := v.(string); ok {
		return s
	}
	return string(canonical)
}
