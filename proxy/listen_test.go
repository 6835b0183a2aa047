package proxy

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestListenSubscriptionsFollowThePlan: a client of protocol 2026-07-28
// (mcp-go v1.2.1's default) that opens subscriptions/listen with
// resourceSubscriptions, over stdio and HTTP, gets none of them
// acknowledged: not the URI the plan does not allow (legacy
// resources/subscribe of it is refused), and not the one it allows, since
// no resources/updated would be delivered on the stream. Each is recorded
// as refused, nothing is subscribed upstream, and the list-change opt-in
// is acknowledged as before.
func TestListenSubscriptionsFollowThePlan(t *testing.T) {
	const allowed, denied = "test://ask/input_required", "test://private/secret"
	for _, front := range []string{"stdio", "http"} {
		t.Run(front, func(t *testing.T) {
			c, p, audit := realClient(t, multiRoundPlan, front, "", &askedHandlers{}, "--mode", "multi-round")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			acks := make(chan mcp.JSONRPCNotification, 4)
			c.OnNotification(func(n mcp.JSONRPCNotification) {
				if n.Method == string(mcp.MethodNotificationSubscriptionsAcknowledged) {
					acks <- n
				}
			})
			stop, err := c.ListenAsync(ctx, mcp.SubscriptionFilter{ToolsListChanged: true,
				ResourceSubscriptions: []string{allowed, denied, denied}}, func(err error) { t.Errorf("listen: %v", err) })
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
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
			if len(got.ResourceSubscriptions) != 0 || !got.ToolsListChanged {
				t.Errorf("acknowledged %s, want toolsListChanged and no resource subscription", b)
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
			want := []string{
				`resource "` + allowed + `": planlock does not deliver resources/updated on a subscriptions/listen stream, so the subscription was not acknowledged`,
				`resource "` + denied + `" is not in plan "mr", so it cannot be subscribed to`,
			}
			if strings.Join(reasons, "\n") != strings.Join(want, "\n") {
				t.Errorf("recorded\n%s\nwant\n%s", strings.Join(reasons, "\n"), strings.Join(want, "\n"))
			}
			p.ex.subMu.Lock()
			n := len(p.ex.subs)
			p.ex.subMu.Unlock()
			if n != 0 {
				t.Errorf("%d URIs subscribed", n)
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
	if err := c.Subscribe(ctx, req); err == nil || !strings.Contains(err.Error(), "is not in plan") {
		t.Errorf("subscribe outside the plan: %v", err)
	}
	req.Params.URI = "test://ask/input_required"
	if err := c.Subscribe(ctx, req); err != nil {
		t.Errorf("subscribe in the plan: %v", err)
	}
	p.ex.subMu.Lock()
	defer p.ex.subMu.Unlock()
	if len(p.ex.subs) != 1 || len(p.ex.subs["test://ask/input_required"]) != 1 {
		t.Errorf("subscribed %v", p.ex.subs)
	}
}
