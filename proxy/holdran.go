package proxy

import (
	"context"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/proxy/ledger"
)

// HoldRunReporter is told that an approved held call ran, so that its
// pull request can say so; *approvals.Approvals has it.
type HoldRunReporter interface {
	Ran(h ledger.Hold, planName string, auditSeq uint64, status string)
}

type ticketSinkKey struct{}

// withTicketSink makes forward report the sequence number of the audit
// record that counts the call into *seq.
func withTicketSink(ctx context.Context, seq *uint64) context.Context {
	return context.WithValue(ctx, ticketSinkKey{}, seq)
}

func noteTicket(ctx context.Context, seq uint64) {
	if p, ok := ctx.Value(ticketSinkKey{}).(*uint64); ok {
		*p = seq
	}
}

// reportHoldRan tells the approver that hold h's call ran (seq 0: it was
// not counted, so it did not run).
func (p *Proxy) reportHoldRan(ctx context.Context, h ledger.Hold, seq uint64, res *mcp.CallToolResult) {
	r, ok := p.cfg.Approvals.(HoldRunReporter)
	if !ok || seq == 0 {
		return
	}
	status := "ok"
	if res == nil || res.IsError {
		status = "error"
	}
	r.Ran(h, p.holdPlanName(ctx), seq, status)
}
