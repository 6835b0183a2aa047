package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// listenPlan is multiRoundPlan with the test upstream's tool that sends
// notifications/resources/updated.
var listenPlan = strings.Replace(multiRoundPlan, `  resource "ask" {`, `  step "touch" {
    tool      = "touch"
    max_calls = 10
    arg "uri" { max_length = 100 }
  }
  resource "ask" {`, 1)

// TestListenSubscriptionsFollowThePlan: a client of protocol 2026-07-28
// (mcp-go v1.2.1's default) that opens subscriptions/listen with
// resourceSubscriptions, over stdio and HTTP, gets acknowledged only the
// URI the plan allows (legacy resources/subscribe of the other is refused
// too), each refused one recorded, and receives resources/updated for the
// allowed one on the stream, tagged with the listen request's id, and for
// no other; the upstream subscription ends with the stream.
func TestListenSubscriptionsFollowThePlan(t *testing.T) {
	const allowed, denied = "test://ask/input_required", "test://private/secret"
	for _, front := range []string{"stdio", "http"} {
		t.Run(front, func(t *testing.T) {
			c, p, audit := realClient(t, listenPlan, front, "", &askedHandlers{}, "--mode", "multi-round")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			acks := make(chan mcp.JSONRPCNotification, 4)
			updates := make(chan mcp.JSONRPCNotification, 8)
			c.OnNotification(func(n mcp.JSONRPCNotification) {
				switch n.Method {
				case string(mcp.MethodNotificationSubscriptionsAcknowledged):
					acks <- n
				case string(mcp.MethodNotificationResourceUpdated):
					updates <- n
				}
			})
			stop, err := c.ListenAsync(ctx, mcp.SubscriptionFilter{ToolsListChanged: true,
				ResourceSubscriptions: []string{allowed, denied, denied}}, func(err error) { t.Errorf("listen: %v", err) })
			if err != nil {
				t.Fatal(err)
			}
			var ack mcp.JSONRPCNotification
			select {
			case ack = <-acks:
			case <-ctx.Done():
				t.Fatal("no acknowledgement within 20s")
			}
			b, _ := json.Marshal(ack.Params.AdditionalFields["notifications"])
			var got mcp.SubscriptionFilter
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("acknowledged %s: %v", b, err)
			}
			if strings.Join(got.ResourceSubscriptions, " ") != allowed || !got.ToolsListChanged {
				t.Errorf("acknowledged %s, want toolsListChanged and %s only", b, allowed)
			}
			listenID := fmt.Sprint(ack.Params.Meta[mcp.MetaKeySubscriptionID])
			for _, uri := range []string{denied, allowed} {
				req := mcp.CallToolRequest{}
				req.Params.Name = "touch"
				req.Params.Arguments = map[string]any{"uri": uri}
				if res, err := c.CallTool(ctx, req); err != nil || res.IsError {
					t.Fatalf("touch %s: %v %+v", uri, err, res)
				}
			}
			select {
			case u := <-updates:
				if u.Params.AdditionalFields["uri"] != allowed || fmt.Sprint(u.Params.Meta[mcp.MetaKeySubscriptionID]) != listenID {
					t.Errorf("delivered %+v, want the update of %s tagged %s", u.Params, allowed, listenID)
				}
			case <-ctx.Done():
				t.Fatal("no resources/updated within 20s")
			}
			var reasons []string
			for _, r := range readAudit(t, audit) {
				if r["tool"] == string(mcp.MethodSubscriptionsListen) {
					if r["decision"] != "block" {
						t.Errorf("a listen record that is no block: %v", r)
					}
					reason, _ := r["reason"].(string)
					reasons = append(reasons, reason)
				}
			}
			if want := `resource "` + denied + `" is not in plan "mr", so it cannot be subscribed to`; strings.Join(reasons, "\n") != want {
				t.Errorf("recorded\n%s\nwant\n%s", strings.Join(reasons, "\n"), want)
			}
			stop()
			// The stream ended: its subscription goes, here and upstream.
			for {
				p.ex.subMu.Lock()
				n := len(p.ex.subs)
				p.ex.subMu.Unlock()
				if n == 0 {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("%d URIs still subscribed after the stream ended", n)
				}
				time.Sleep(time.Millisecond)
			}
			select {
			case u := <-updates:
				t.Errorf("delivered %+v besides the allowed URI's update", u.Params)
			default:
			}
		})
	}
}

// TestLegacySubscribeOfAURIOutsideThePlanIsRefused is the legacy side of
// the same decision: resources/subscribe of a URI no resource block
// matches is refused, of one it matches is subscribed.
func TestLegacySubscribeOfAURIOutsideThePlanIsRefused(t *testing.T) {
	c, p, _ := realClient(t, multiRoundPlan, "stdio", mcp.LATEST_LEGACY_PROTOCOL_VERSION, &askedHandlers{}, "--mode", "multi-round")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := mcp.SubscribeRequest{}
	req.Params.URI = "test://private/secret"
	//lint:ignore SA1019 the legacy RPC is what this test is about
	if err := c.Subscribe(ctx, req); err == nil || !strings.Contains(err.Error(), "is not in plan") {
		t.Errorf("subscribe outside the plan: %v", err)
	}
	req.Params.URI = "test://ask/input_required"
	//lint:ignore SA1019 the legacy RPC is what this test is about
	if err := c.Subscribe(ctx, req); err != nil {
		t.Errorf("subscribe in the plan: %v", err)
	}
	p.ex.subMu.Lock()
	defer p.ex.subMu.Unlock()
	if len(p.ex.subs) != 1 || len(p.ex.subs["test://ask/input_required"]) != 1 {
		t.Errorf("subscribed %v", p.ex.subs)
	}
}

// TestListenWithoutUpstreamSubscriptions: when the upstream announced no
// resource subscriptions, a listen request's allowed URI is not
// acknowledged (it would never be delivered) and is recorded as refused.
func TestListenWithoutUpstreamSubscriptions(t *testing.T) {
	const allowed = "test://ask/input_required"
	for _, front := range []string{"stdio", "http"} {
		t.Run(front, func(t *testing.T) {
			c, p, audit := realClient(t, multiRoundPlan, front, "", &askedHandlers{}) // the normal mode has no resources
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			acks := make(chan mcp.JSONRPCNotification, 4)
			c.OnNotification(func(n mcp.JSONRPCNotification) {
				if n.Method == string(mcp.MethodNotificationSubscriptionsAcknowledged) {
					acks <- n
				}
			})
			stop, err := c.ListenAsync(ctx, mcp.SubscriptionFilter{ToolsListChanged: true, ResourceSubscriptions: []string{allowed}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			select {
			case ack := <-acks:
				if b, _ := json.Marshal(ack.Params.AdditionalFields["notifications"]); strings.Contains(string(b), "resourceSubscriptions") {
					t.Errorf("acknowledged %s", b)
				}
			case <-ctx.Done():
				t.Fatal("no acknowledgement within 20s")
			}
			found := false
			for _, r := range readAudit(t, audit) {
				if r["tool"] == string(mcp.MethodSubscriptionsListen) && r["decision"] == "block" &&
					r["reason"] == `resource "`+allowed+`": the upstream offers no subscriptions, so none was acknowledged` {
					found = true
				}
			}
			if !found {
				t.Errorf("no block record for %s", allowed)
			}
			p.ex.subMu.Lock()
			defer p.ex.subMu.Unlock()
			if len(p.ex.subs) != 0 {
				t.Errorf("subscribed %v", p.ex.subs)
			}
		})
	}
}

// TestExpiredPlanRefusesEveryOp: once the plan has expired no request it
// governs is allowed, whatever its kind: a read, a get, a legacy
// subscription, a listen stream's resourceSubscriptions and a completion
// are refused with the expiry and recorded, and nothing reaches the
// upstream (before, subscriptions and completions were forwarded).
func TestExpiredPlanRefusesEveryOp(t *testing.T) {
	const uri = "test://ask/complete"
	for _, version := range []string{"", mcp.LATEST_LEGACY_PROTOCOL_VERSION} {
		t.Run("v"+version, func(t *testing.T) {
			plan := strings.Replace(listenPlan, `goal  = "multi-round results"`, `goal    = "multi-round results"
  expires = "2030-01-01T00:00:00Z"`, 1)
			c, p, audit := realClient(t, plan, "stdio", version, &askedHandlers{}, "--mode", "multi-round")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			// Allowed while the plan holds: a completion reaches the upstream.
			cr := mcp.CompleteRequest{}
			cr.Params.Ref = mcp.PromptReference{Type: "ref/prompt", Name: "ask"}
			cr.Params.Argument.Name, cr.Params.Argument.Value = "resultType", "el"
			if res, err := c.Complete(ctx, cr); err != nil || len(res.Completion.Values) != 1 || res.Completion.Values[0] != "elicit" {
				t.Fatalf("completion before expiry: %v %+v", err, res)
			}
			late := p.cur.Load().plan.Expires.Add(time.Second)
			p.cfg.Now = func() time.Time { return late }
			const want = "expired at"
			if _, err := c.Complete(ctx, cr); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("completion: %v, want the expiry", err)
			}
			rr := mcp.ReadResourceRequest{}
			rr.Params.URI = uri
			if _, err := c.ReadResource(ctx, rr); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("read: %v, want the expiry", err)
			}
			gr := mcp.GetPromptRequest{}
			gr.Params.Name = "ask"
			gr.Params.Arguments = map[string]string{"resultType": "complete"}
			if _, err := c.GetPrompt(ctx, gr); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("get: %v, want the expiry", err)
			}
			if version != "" {
				req := mcp.SubscribeRequest{}
				req.Params.URI = uri
				//lint:ignore SA1019 the legacy RPC is what this subtest is about
				if err := c.Subscribe(ctx, req); err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("subscribe: %v, want the expiry", err)
				}
			} else {
				acks := make(chan mcp.JSONRPCNotification, 1)
				c.OnNotification(func(n mcp.JSONRPCNotification) {
					if n.Method == string(mcp.MethodNotificationSubscriptionsAcknowledged) {
						acks <- n
					}
				})
				stop, err := c.ListenAsync(ctx, mcp.SubscriptionFilter{ResourceSubscriptions: []string{uri}}, func(error) {})
				if err != nil {
					t.Fatal(err)
				}
				defer stop()
				select {
				case ack := <-acks:
					b, _ := json.Marshal(ack.Params.AdditionalFields["notifications"])
					if strings.Contains(string(b), uri) {
						t.Errorf("acknowledged %s after expiry", b)
					}
				case <-ctx.Done():
					t.Fatal("no acknowledgement within 20s")
				}
			}
			p.ex.subMu.Lock()
			n := len(p.ex.subs)
			p.ex.subMu.Unlock()
			if n != 0 {
				t.Errorf("%d URIs subscribed after expiry", n)
			}
			blocked := map[string]int{}
			for _, r := range readAudit(t, audit) {
				if reason, _ := r["reason"].(string); r["decision"] == "block" && strings.Contains(reason, want) {
					blocked[r["tool"].(string)]++
				}
			}
			sub := string(mcp.MethodSubscriptionsListen)
			if version != "" {
				sub = string(mcp.MethodResourcesSubscribe)
			}
			for _, m := range []string{string(mcp.MethodCompletionComplete), string(mcp.MethodResourcesRead), string(mcp.MethodPromptsGet), sub} {
				if blocked[m] != 1 {
					t.Errorf("%d expiry blocks of %s recorded, want 1 (%v)", blocked[m], m, blocked)
				}
			}
		})
	}
}
