package proxy

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/hclplan"
)

const swapPlanV1 = `
plan "swap" {
  goal  = "look up order 4711 once"
  order = "any"
  step "lookup" {
    tool      = "get_order"
    max_calls = 1
    arg "order_id" { eq = "4711" }
  }
}`

const swapPlanV2 = `
plan "swap" {
  goal  = "look up order 4712 twice, then close the ticket"
  order = "any"
  step "lookup" {
    tool      = "get_order"
    max_calls = 2
    arg "order_id" { eq = "4712" }
  }
  step "close" {
    tool = "close_ticket"
    arg "ticket_id" { eq = "T-4711" }
    arg "comment"   { any = true }
  }
}`

func TestSetPlanSwapsToolsLimitsAndCounts(t *testing.T) {
	h := newHarness(t, swapPlanV1, harnessOpts{})
	changed := make(chan struct{}, 16)
	h.client.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationToolsListChanged) {
			changed <- struct{}{}
		}
	})
	if _, isErr := h.call("get_order", `{"order_id":"4711"}`); isErr {
		t.Fatal("v1: first lookup blocked")
	}
	if text, _ := h.call("get_order", `{"order_id":"4711"}`); !strings.Contains(text, `max_calls 1 used up`) {
		t.Fatalf("v1: second lookup: %q", text)
	}
	if names := h.listedTools(); names != "get_order" {
		t.Fatalf("v1 tools: %s", names)
	}
	for len(changed) > 0 { // earlier notifications (upstream connected)
		<-changed
	}

	v2, diags := hclplan.Parse("plan.hcl", []byte(swapPlanV2))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if err := h.proxy.SetPlan(v2); err != nil {
		t.Fatal(err)
	}
	if h.proxy.Plan() != v2 {
		t.Fatal("Plan() is not the new plan")
	}
	select {
	case <-changed:
	case <-time.After(30 * time.Second): // a bound on waiting, not a timing assertion
		t.Fatal("the client was not sent notifications/tools/list_changed")
	}
	if names := h.listedTools(); names != "close_ticket,get_order" {
		t.Fatalf("v2 tools: %s", names)
	}
	desc := h.toolDescription("get_order")
	if !strings.Contains(desc, `step "lookup": max_calls 2; order_id = "4712"`) {
		t.Fatalf("get_order description does not show the new limits: %q", desc)
	}
	// The new plan's rules, and its own counts (a new digest).
	cases := []struct {
		tool, args string
		wantErr    bool
		want       string
	}{
		{"get_order", `{"order_id":"4711"}`, true, `blocked by plan "swap": step "lookup": argument "order_id" = "4711", want "4712"`},
		{"get_order", `{"order_id":"4712"}`, false, `"order_id":"4712"`},
		{"get_order", `{"order_id":"4712"}`, false, `"order_id":"4712"`},
		{"get_order", `{"order_id":"4712"}`, true, `max_calls 2 used up`},
		{"close_ticket", `{"ticket_id":"T-4711","comment":"done"}`, false, `"status":"closed"`},
	}
	for i, c := range cases {
		text, isErr := h.call(c.tool, c.args)
		if isErr != c.wantErr || !strings.Contains(text, c.want) {
			t.Fatalf("call %d %s %s: isError=%v %q, want %v containing %q", i, c.tool, c.args, isErr, text, c.wantErr, c.want)
		}
	}
	if got := h.upstreamCalls(); got["get_order"] != 3 || got["close_ticket"] != 1 {
		t.Fatalf("upstream received %v, want 3 get_order (1 under v1, 2 under v2) and 1 close_ticket", got)
	}
	if p1, p2 := h.ledger.Progress(h.plan.Digest), h.ledger.Progress(v2.Digest); p1.Calls(0) != 1 || p2.Calls(0) != 2 || p2.Calls(1) != 1 {
		t.Fatalf("counts: v1 %d, v2 %d/%d", p1.Calls(0), p2.Calls(0), p2.Calls(1))
	}
	if err := h.proxy.SetPlan(nil); err == nil {
		t.Fatal("SetPlan(nil) accepted")
	}
}

// listedTools is the proxy's tools/list, names sorted and joined.
func (h *harness) listedTools() string {
	h.t.Helper()
	res, err := h.client.ListTools(h.ctx, mcp.ListToolsRequest{})
	if err != nil {
		h.t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return strings.Join(names, ",")
}

func (h *harness) toolDescription(name string) string {
	h.t.Helper()
	res, err := h.client.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if tool.Name == name {
			return tool.Description
		}
	}
	return ""
}

// Calls racing with plan swaps: each call runs under one plan, and no plan's
// max_calls is exceeded (run with -race).
func TestSetPlanDuringCallsKeepsEachPlansLimits(t *testing.T) {
	h := newHarness(t, swapPlanV1, harnessOpts{})
	v1 := h.plan
	v2, diags := hclplan.Parse("plan.hcl", []byte(strings.ReplaceAll(swapPlanV2, "4712", "4711")))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 20 {
			plan := v1
			if i%2 == 0 {
				plan = v2
			}
			if err := h.proxy.SetPlan(plan); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			text, isErr := h.call("get_order", `{"order_id":"4711"}`)
			if isErr && !strings.Contains(text, "used up") {
				t.Errorf("unexpected answer: %q", text)
			}
		}()
	}
	wg.Wait()
	<-done
	c1, c2 := h.ledger.Progress(v1.Digest).Calls(0), h.ledger.Progress(v2.Digest).Calls(0)
	if c1 > 1 || c2 > 2 || h.upstreamCalls()["get_order"] != c1+c2 {
		t.Fatalf("counted %d under v1 (max 1) and %d under v2 (max 2); upstream received %d", c1, c2, h.upstreamCalls()["get_order"])
	}
}
