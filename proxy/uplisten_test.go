package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/internal/testkit/peers"
)

// listenUpstream is a modern-only HTTP upstream with resource
// subscriptions: subscriptions/listen answers with an SSE stream that
// acknowledges what was asked and then carries notifications/resources/
// updated for the subscribed URIs when the tool touch names one. It keeps
// every listen filter it received.
type listenUpstream struct {
	mu       sync.Mutex
	filters  []mcp.SubscriptionFilter // every subscriptions/listen received
	streams  map[*listenStream]bool   // open ones
	endFirst string                   // the first stream naming this URI ends right after its acknowledgement
	tools    string                   // the tools/list result's tools array; "" is the touch tool
}

// setTools changes the tools the upstream lists and tells every open
// stream that asked for list changes, as a modern server does.
func (s *listenUpstream) setTools(tools string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tools = tools
	for st := range s.streams {
		if st.filter.ToolsListChanged {
			st.out <- fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":%s}}}`, st.id)
		}
	}
}

type listenStream struct {
	id     json.RawMessage
	filter mcp.SubscriptionFilter
	out    chan string
}

func (s *listenUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Arguments struct {
				URI string `json:"uri"`
			} `json:"arguments"`
			URI           string                 `json:"uri"`
			Notifications mcp.SubscriptionFilter `json:"notifications"`
		} `json:"params"`
	}
	_ = json.NewDecoder(r.Body).Decode(&m)
	if len(m.ID) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var result string
	switch m.Method {
	case "server/discover":
		result = `{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true}},"serverInfo":{"name":"listen-upstream","version":"1"}}`
	case "tools/list":
		s.mu.Lock()
		tools := s.tools
		s.mu.Unlock()
		if tools == "" {
			tools = touchTool
		}
		result = `{"tools":` + tools + `}`
	case "resources/list":
		result = `{"resources":[{"uri":"demo://allowed","name":"allowed"},{"uri":"demo://secret","name":"secret"}]}`
	case "resources/templates/list":
		result = `{"resourceTemplates":[]}`
	case "resources/read":
		result = fmt.Sprintf(`{"contents":[{"uri":%q,"text":"content"}]}`, m.Params.URI)
	case "tools/call":
		uri := m.Params.Arguments.URI
		s.mu.Lock()
		for st := range s.streams {
			if slices.Contains(st.filter.ResourceSubscriptions, uri) {
				st.out <- fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":%s},"uri":%q}}`, st.id, uri)
			}
		}
		s.mu.Unlock()
		result = `{"content":[{"type":"text","text":"touched"}]}`
	case "subscriptions/listen":
		s.listen(w, r, m.ID, m.Params.Notifications)
		return
	default:
		result = `{}`
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
}

// touchTool is the listen upstream's tool list unless setTools changed it.
const touchTool = `[{"name":"touch","inputSchema":{"type":"object","properties":{"uri":{"type":"string"}}}}]`

func (s *listenUpstream) listen(w http.ResponseWriter, r *http.Request, id json.RawMessage, f mcp.SubscriptionFilter) {
	st := &listenStream{id: id, filter: f, out: make(chan string, 16)}
	s.mu.Lock()
	s.filters = append(s.filters, f)
	s.streams[st] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.streams, st)
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	ack, _ := json.Marshal(f)
	fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":%s},\"notifications\":%s}}\n\n", id, ack)
	fl.Flush()
	s.mu.Lock()
	end := s.endFirst != "" && slices.Contains(f.ResourceSubscriptions, s.endFirst)
	if end {
		s.endFirst = ""
	}
	s.mu.Unlock()
	if end {
		fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{}}\n\n", id)
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case msg := <-st.out:
			fmt.Fprintf(w, "event: message\ndata: %s\n\n", msg)
			fl.Flush()
		}
	}
}

// subscribed reports whether an open listen stream names uri.
func (s *listenUpstream) subscribed(uri string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for st := range s.streams {
		if slices.Contains(st.filter.ResourceSubscriptions, uri) {
			return true
		}
	}
	return false
}

// everAsked reports whether any listen request named uri.
func (s *listenUpstream) everAsked(uri string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.filters {
		if slices.Contains(f.ResourceSubscriptions, uri) {
			return true
		}
	}
	return false
}

const upListenPlan = `
plan "listen" {
  goal  = "resource updates through planlock's own listen stream"
  order = "any"
  step "touch" {
    tool      = "touch"
    max_calls = 10
    arg "uri" { any = true }
  }
  resource "allowed" {
    uri       = "demo://allowed"
    max_reads = 5
  }
}`

// TestListenTowardModernUpstream: a modern upstream (2026-07-28 only, no
// resources/subscribe) with resource subscriptions. A modern client's
// subscriptions/listen for an allowed and a refused URI is acknowledged for
// the allowed one only; planlock subscribes upstream on its own listen
// stream for the allowed one and never names the refused one; the
// upstream's resources/updated reaches the client's stream; when the
// client's stream ends, planlock's stream is replaced by one without it.
func TestListenTowardModernUpstream(t *testing.T) {
	up := &listenUpstream{streams: map[*listenStream]bool{}}
	ts := httptest.NewServer(up)
	t.Cleanup(ts.Close) // after the proxy's cleanup, which ends its stream
	p := eraProxy(t, upListenPlan, UpstreamConfig{URL: ts.URL + "/mcp"})
	c := eraClient(t, p, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var mu sync.Mutex
	var updated []string
	var acked []mcp.SubscriptionFilter
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		mu.Lock()
		defer mu.Unlock()
		switch n.Method {
		case string(mcp.MethodNotificationResourceUpdated):
			uri, _ := n.Params.AdditionalFields["uri"].(string)
			updated = append(updated, uri)
		case mcp.MethodNotificationSubscriptionsAcknowledged:
			var f mcp.SubscriptionFilter
			b, _ := json.Marshal(n.Params.AdditionalFields["notifications"])
			_ = json.Unmarshal(b, &f)
			acked = append(acked, f)
		}
	})
	lctx, stop := context.WithCancel(ctx)
	listenDone := make(chan error, 1)
	go func() {
		listenDone <- c.Listen(lctx, mcp.SubscriptionFilter{ResourceSubscriptions: []string{"demo://allowed", "demo://secret"}})
	}()
	if !eventually(func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) > 0 }) {
		t.Fatal("the client's listen was not acknowledged")
	}
	mu.Lock()
	if got := acked[0].ResourceSubscriptions; !slices.Equal(got, []string{"demo://allowed"}) {
		t.Errorf("acknowledged %v, want only demo://allowed", got)
	}
	mu.Unlock()
	if !up.subscribed("demo://allowed") {
		t.Fatal("planlock did not subscribe upstream to demo://allowed before acknowledging it")
	}
	for _, uri := range []string{"demo://secret", "demo://allowed"} {
		if res, err := callTool(ctx, c, "touch", map[string]any{"uri": uri}); refused(res, err) {
			t.Fatalf("touch %s: %v %+v", uri, err, res)
		}
	}
	if !eventually(func() bool { mu.Lock(); defer mu.Unlock(); return len(updated) > 0 }) {
		t.Fatal("resources/updated for demo://allowed did not reach the client")
	}
	mu.Lock()
	if !slices.Equal(updated, []string{"demo://allowed"}) {
		t.Errorf("the client received updates for %v, want demo://allowed", updated)
	}
	mu.Unlock()
	if up.everAsked("demo://secret") {
		t.Error("planlock subscribed upstream to demo://secret, which the plan refuses")
	}
	stop()
	<-listenDone
	if !eventually(func() bool { return !up.subscribed("demo://allowed") }) {
		t.Error("planlock still listens upstream for demo://allowed after the client's stream ended")
	}
}

// listenStdio is listenUpstream over stdio (node): every subscriptions/listen
// it receives is appended to log as a JSON line of its filter.
func listenStdio(t *testing.T, log string) []string {
	t.Helper()
	script := `const fs = require("fs");
const log = process.argv[1];
const streams = new Map();
const say = (m) => process.stdout.write(JSON.stringify({jsonrpc: "2.0", ...m}) + "\n");
require("readline").createInterface({input: process.stdin}).on("line", (l) => {
  let m; try { m = JSON.parse(l); } catch { return; }
  const p = m.params || {};
  if (m.method === "notifications/cancelled") { streams.delete(String(p.requestId)); return; }
  if (m.id === undefined) return;
  switch (m.method) {
  case "server/discover": return say({id: m.id, result: {supportedVersions: ["2026-07-28"],
    capabilities: {tools: {listChanged: true}, resources: {subscribe: true, listChanged: true}}, serverInfo: {name: "listen-stdio", version: "1"}}});
  case "tools/list": return say({id: m.id, result: {tools: [{name: "touch", inputSchema: {type: "object", properties: {uri: {type: "string"}}}}]}});
  case "resources/list": return say({id: m.id, result: {resources: [{uri: "demo://allowed", name: "allowed"}, {uri: "demo://secret", name: "secret"}]}});
  case "resources/templates/list": return say({id: m.id, result: {resourceTemplates: []}});
  case "tools/call": {
    const uri = (p.arguments || {}).uri;
    for (const [id, s] of streams) if ((s.resourceSubscriptions || []).includes(uri))
      say({method: "notifications/resources/updated", params: {_meta: {"io.modelcontextprotocol/subscriptionId": s.id}, uri}});
    return say({id: m.id, result: {content: [{type: "text", text: "touched"}]}});
  }
  case "subscriptions/listen": {
    const f = p.notifications || {};
    fs.appendFileSync(log, JSON.stringify(f) + "\n");
    streams.set(String(m.id), {...f, id: m.id});
    return say({method: "notifications/subscriptions/acknowledged", params: {_meta: {"io.modelcontextprotocol/subscriptionId": m.id}, notifications: f}});
  }
  default: return say({id: m.id, result: {}});
  }
});`
	return []string{peers.Node(t), "-e", script, log}
}

// TestListenTowardModernStdioUpstream is TestListenTowardModernUpstream over
// stdio, with a legacy client (resources/subscribe): the subscription of an
// allowed URI is planlock's listen stream upstream, a refused URI is
// refused and never named upstream, and the update reaches the client.
func TestListenTowardModernStdioUpstream(t *testing.T) {
	log := filepath.Join(t.TempDir(), "listens.jsonl")
	p := eraProxy(t, upListenPlan, UpstreamConfig{Command: listenStdio(t, log)})
	c := eraClient(t, p, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	var updated []string
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationResourceUpdated) {
			uri, _ := n.Params.AdditionalFields["uri"].(string)
			mu.Lock()
			updated = append(updated, uri)
			mu.Unlock()
		}
	})
	sub := func(uri string) error {
		req := mcp.SubscribeRequest{}
		req.Params.URI = uri
		//lint:ignore SA1019 a legacy client subscribes with resources/subscribe
		return c.Subscribe(ctx, req)
	}
	if err := sub("demo://secret"); err == nil {
		t.Fatal("resources/subscribe of demo://secret, which the plan refuses, succeeded")
	}
	if err := sub("demo://allowed"); err != nil {
		t.Fatalf("resources/subscribe demo://allowed: %v", err)
	}
	for _, uri := range []string{"demo://secret", "demo://allowed"} {
		if res, err := callTool(ctx, c, "touch", map[string]any{"uri": uri}); refused(res, err) {
			t.Fatalf("touch %s: %v %+v", uri, err, res)
		}
	}
	if !eventually(func() bool { mu.Lock(); defer mu.Unlock(); return len(updated) > 0 }) {
		t.Fatal("resources/updated for demo://allowed did not reach the client")
	}
	mu.Lock()
	if !slices.Equal(updated, []string{"demo://allowed"}) {
		t.Errorf("the client received updates for %v, want demo://allowed", updated)
	}
	mu.Unlock()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"demo://allowed"`) || strings.Contains(string(b), "secret") {
		t.Fatalf("the upstream's listen requests:\n%s\nwant demo://allowed and never demo://secret", b)
	}
}

// TestListenStreamEndedByTheUpstreamIsOpenedAgain: a modern upstream that
// ends planlock's listen stream (a restarted HTTP server) gets it again,
// with the same subscriptions, and updates reach the client again.
func TestListenStreamEndedByTheUpstreamIsOpenedAgain(t *testing.T) {
	// The stream that acknowledges the subscription ends at once (named
	// by what it asks for: which stream is the how-many-th depends on
	// how the connection's own listens interleave).
	up := &listenUpstream{streams: map[*listenStream]bool{}, endFirst: "demo://allowed"}
	ts := httptest.NewServer(up)
	t.Cleanup(ts.Close) // after the proxy's cleanup, which ends its stream
	p := eraProxy(t, upListenPlan, UpstreamConfig{URL: ts.URL + "/mcp"})
	c := eraClient(t, p, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	var updated []string
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationResourceUpdated) {
			uri, _ := n.Params.AdditionalFields["uri"].(string)
			mu.Lock()
			updated = append(updated, uri)
			mu.Unlock()
		}
	})
	if !eventually(func() bool { up.mu.Lock(); defer up.mu.Unlock(); return len(up.streams) == 1 }) {
		t.Fatal("planlock opened no listen stream on connecting")
	}
	req := mcp.SubscribeRequest{}
	req.Params.URI = "demo://allowed"
	//lint:ignore SA1019 a legacy client subscribes with resources/subscribe
	if err := c.Subscribe(ctx, req); err != nil {
		t.Fatalf("resources/subscribe demo://allowed: %v", err)
	}
	// The stream that acknowledged it was ended at once: planlock opens
	// it again. Wait for a second stream naming the URI: the ended one
	// may still be listed for a moment, and an update sent to it is lost
	// with it.
	if !eventually(func() bool {
		up.mu.Lock()
		n := 0
		for _, f := range up.filters {
			if slices.Contains(f.ResourceSubscriptions, "demo://allowed") {
				n++
			}
		}
		up.mu.Unlock()
		return n >= 2 && up.subscribed("demo://allowed")
	}) {
		up.mu.Lock()
		defer up.mu.Unlock()
		t.Fatalf("planlock did not listen again after the upstream ended its stream (listens received: %+v; open: %d)", up.filters, len(up.streams))
	}
	if res, err := callTool(ctx, c, "touch", map[string]any{"uri": "demo://allowed"}); refused(res, err) {
		t.Fatalf("touch: %v %+v", err, res)
	}
	if !eventually(func() bool { mu.Lock(); defer mu.Unlock(); return len(updated) == 1 }) {
		t.Fatal("resources/updated did not reach the client after the stream was opened again")
	}
}
