package proxy

import (
	"context"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/proxy/ledger"
)

// HoldRunReporter is told that an approved held call ran, so that its
// pull request can say so; the hold-PR backend (internal/approvals) has it.
type HoldRunReporter interface {
	Ran(h ledger.Hold, planName string, auditSeq uint64, status string)
}

// reportHoldRan tells the approver that the call consuming hold holdID ran,
// counted in audit record seq ("" holdID: no hold, nothing to tell).
func (p *Proxy) reportHoldRan(ctx context.Context, st *planState, call ledger.Call, holdID string, seq uint64, res *mcp.CallToolResult) {
	r, ok := p.cfg.Approvals.(HoldRunReporter)
	if !ok || holdID == "" {
		return
	}
	h, found := p.cfg.State.FindHold(call)
	if !found || h.ID != holdID {
		return
	}
	status := "ok"
	if res == nil || res.IsError {
		status = "error"
	}
	r.Ran(h, st.plan.Name, seq, status)
}
