package proxy

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// recorder keeps every call an observer is told about.
type recorder struct {
	mu     sync.Mutex
	starts []CallStart
	ends   []CallEnd
}

func (r *recorder) StartCall(ctx context.Context, c CallStart) (context.Context, func(CallEnd)) {
	r.mu.Lock()
	r.starts = append(r.starts, c)
	r.mu.Unlock()
	ended := false
	return ctx, func(e CallEnd) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if ended {
			panic("call ended twice")
		}
		ended = true
		r.ends = append(r.ends, e)
	}
}

func (r *recorder) last(t *testing.T) (CallStart, CallEnd) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.starts) != len(r.ends) || len(r.ends) == 0 {
		t.Fatalf("%d calls started, %d ended", len(r.starts), len(r.ends))
	}
	return r.starts[len(r.starts)-1], r.ends[len(r.ends)-1]
}

// Every tools/call tells the observer once what became of it, with a rule
// from the fixed set for anything not forwarded.
func TestObserverSeesEachCallsOutcome(t *testing.T) {
	rec := &recorder{}
	h := newHarness(t, refundPlan, harnessOpts{observer: rec})
	tests := []struct {
		tool, args string
		want       CallEnd
		upstream   bool
	}{
		{"get_order", `{"order_id":"4711"}`, CallEnd{Step: "lookup", Outcome: OutcomeForwarded}, true},
		{"get_order", `{"order_id":"9"}`, CallEnd{Step: "lookup", Outcome: OutcomeBlocked, Rule: "args"}, false},
		{"drop_database", `{}`, CallEnd{Outcome: OutcomeBlocked, Rule: "unplanned"}, false},
		{"get_order", `[1]`, CallEnd{Outcome: OutcomeBlocked, Rule: "args"}, false},
		{"refund_customer", `{"order_id":"4711","amount":20,"currency":"EUR"}`, CallEnd{Step: "refund", Outcome: OutcomeForwarded}, true},
		{"get_order", `{"order_id":"4711"}`, CallEnd{Step: "lookup", Outcome: OutcomeBlocked, Rule: "order"}, false},
		{"send_email", `{"to":"customer-4711@example.com","body":"hi"}`, CallEnd{Step: "email", Outcome: OutcomeHeld, Rule: "approval"}, false},
	}
	for i, tt := range tests {
		if tt.want.Rule == "unplanned" {
			// mcp-go answers a tool it does not list itself; the proxy
			// audits it (and tells the observer) from its error hook.
			req := mcp.CallToolRequest{}
			req.Params.Name, req.Params.Arguments = tt.tool, json.RawMessage(tt.args)
			if _, err := h.client.CallTool(h.ctx, req); err == nil {
				t.Fatalf("call %d: unplanned tool answered", i)
			}
		} else {
			h.call(tt.tool, tt.args)
		}
		start, end := rec.last(t)
		if start.Plan != "refund-4711" || start.Tool != tt.tool {
			t.Fatalf("call %d: start %+v", i, start)
		}
		if got := (CallEnd{Step: end.Step, Outcome: end.Outcome, Rule: end.Rule}); got != tt.want {
			t.Fatalf("call %d (%s %s): end %+v, want %+v", i, tt.tool, tt.args, got, tt.want)
		}
		if (end.Upstream > 0) != tt.upstream {
			t.Fatalf("call %d: upstream time %v, want forwarded %v", i, end.Upstream, tt.upstream)
		}
	}
	if n := len(rec.ends); n != len(tests) {
		t.Fatalf("%d calls observed, want %d", n, len(tests))
	}
}

// A dead upstream: the call is neither forwarded nor counted, and the
// observer says so.
func TestObserverSeesUpstreamDown(t *testing.T) {
	rec := &recorder{}
	h := newHarness(t, refundPlan, harnessOpts{observer: rec, command: []string{"/nonexistent/upstream"}})
	h.call("get_order", `{"order_id":"4711"}`)
	_, end := rec.last(t)
	if end.Outcome != OutcomeNotSent || end.Rule != RuleUpstreamDown {
		t.Fatalf("end %+v, want not_sent/%s", end, RuleUpstreamDown)
	}
}
