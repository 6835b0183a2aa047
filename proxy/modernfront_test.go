package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// modernMeta is the _meta of a request of protocol 2026-07-28.
const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

// modernHeaders are the headers of a modern POST of method (and name).
func modernHeaders(method, name string) map[string]string {
	h := map[string]string{mcp.HeaderProtocolVersion: mcp.ProtocolVersion20260728, mcp.HeaderMethod: method, server.HeaderKeySessionID: ""}
	if name != "" {
		h[mcp.HeaderName] = name
	}
	return h
}

// do sends a request without a body to the side's endpoint.
func (s *httpSide) do(method string, headers map[string]string) (int, string, http.Header) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.url, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// TestModernHTTPFront: over streamable HTTP, a request of protocol
// 2026-07-28 is served whatever Mcp-Session-Id it carries (an unknown
// one, another's, a forged one), with no session ID in the answer; its
// GET and DELETE get 405 with Allow: POST; a legacy request keeps the 404
// of an unknown session and the 400 of a GET without one. Lane on and off.
func TestModernHTTPFront(t *testing.T) {
	const forged = "mcp-session-0b7c3a9e-6a53-4a8e-9d1f-2f4a1c9b8e70"
	call := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"},` + modernMeta + `}}`
	list := `{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{` + modernMeta + `}}`
	for _, fast := range []bool{false, true} {
		s := newHTTPSide(t, fast)
		with := func(h map[string]string, k, v string) map[string]string {
			h[k] = v
			return h
		}
		for _, tt := range []struct {
			name    string
			headers map[string]string
			body    string
			want    int
			in      string // in the answer
		}{
			{"modern call, no session", modernHeaders("tools/call", "echo"), call, http.StatusOK, `"text":"hi"`},
			{"modern call, unknown session", with(modernHeaders("tools/call", "echo"), server.HeaderKeySessionID, forged), call, http.StatusOK, `"text":"hi"`},
			{"modern call, the legacy session's ID", with(modernHeaders("tools/call", "echo"), server.HeaderKeySessionID, s.sid), call, http.StatusOK, `"text":"hi"`},
			{"modern list, unknown session", with(modernHeaders("tools/list", ""), server.HeaderKeySessionID, forged), list, http.StatusOK, `"name":"echo"`},
			{"legacy call, unknown session", map[string]string{server.HeaderKeySessionID: forged},
				`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`, http.StatusNotFound, "unknown session"},
		} {
			code, text, h := s.post(tt.headers, tt.body)
			if code != tt.want || !strings.Contains(text, tt.in) {
				t.Errorf("fast %v, %s: HTTP %d %s, want %d with %q", fast, tt.name, code, text, tt.want, tt.in)
			}
			if sid := h.Get(server.HeaderKeySessionID); tt.want == http.StatusOK && sid != "" {
				t.Errorf("fast %v, %s: answered session ID %q", fast, tt.name, sid)
			}
		}
		for _, tt := range []struct {
			name    string
			method  string
			headers map[string]string
			want    int
		}{
			{"modern GET", http.MethodGet, map[string]string{mcp.HeaderProtocolVersion: mcp.ProtocolVersion20260728}, http.StatusMethodNotAllowed},
			{"modern DELETE", http.MethodDelete, map[string]string{mcp.HeaderProtocolVersion: mcp.ProtocolVersion20260728}, http.StatusMethodNotAllowed},
			{"modern GET, unknown session", http.MethodGet, map[string]string{mcp.HeaderProtocolVersion: mcp.ProtocolVersion20260728, server.HeaderKeySessionID: forged}, http.StatusMethodNotAllowed},
			{"modern DELETE of the legacy session", http.MethodDelete, map[string]string{mcp.HeaderProtocolVersion: mcp.ProtocolVersion20260728, server.HeaderKeySessionID: s.sid}, http.StatusMethodNotAllowed},
			{"legacy GET without a session", http.MethodGet, nil, http.StatusBadRequest},
			{"legacy DELETE, unknown session", http.MethodDelete, map[string]string{server.HeaderKeySessionID: forged}, http.StatusNotFound},
		} {
			code, body, h := s.do(tt.method, tt.headers)
			if code != tt.want {
				t.Errorf("fast %v, %s: HTTP %d %q, want %d", fast, tt.name, code, body, tt.want)
			}
			if code == http.StatusMethodNotAllowed && h.Get("Allow") != http.MethodPost {
				t.Errorf("fast %v, %s: Allow %q, want POST", fast, tt.name, h.Get("Allow"))
			}
		}
		// The legacy session survived the modern DELETE naming it.
		if code, text, _ := s.post(nil, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"message":"still"}}}`); code != http.StatusOK || !strings.Contains(text, "still") {
			t.Errorf("fast %v: the legacy session after a modern DELETE: HTTP %d %s", fast, code, text)
		}
	}
}

// TestModernDiscoverAdvertisesOnlyWhatIsRelayed: server/discover (over
// HTTP, and to mcp-go's modern client over stdio and HTTP) advertises
// logging (a request's log level is relayed, loglevel.go), resource
// subscriptions (delivered on subscriptions/listen) and tools, as
// initialize.
func TestModernDiscoverAdvertisesOnlyWhatIsRelayed(t *testing.T) {
	s := newHTTPSidePlan(t, multiRoundPlan, true, nil, "--mode", "multi-round")
	code, text, _ := s.post(modernHeaders("server/discover", ""), `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+modernMeta+`}}`)
	if code != http.StatusOK {
		t.Fatalf("discover: HTTP %d %s", code, text)
	}
	var env struct {
		Result struct {
			Capabilities map[string]json.RawMessage `json:"capabilities"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(text[strings.Index(text, "{"):]), &env); err != nil {
		t.Fatalf("discover: %v: %s", err, text)
	}
	caps := env.Result.Capabilities
	if _, ok := caps["logging"]; !ok || caps["tools"] == nil || !strings.Contains(string(caps["resources"]), `"subscribe":true`) {
		t.Errorf("discover advertised %s", text)
	}
	for _, front := range []string{"stdio", "http"} {
		c, _, _ := realClient(t, multiRoundPlan, front, "", &askedHandlers{}, "--mode", "multi-round")
		got := c.GetServerCapabilities()
		if got.Logging == nil || got.Resources == nil || !got.Resources.Subscribe || got.Tools == nil {
			b, _ := json.Marshal(got)
			t.Errorf("%s: the modern client was told %s", front, b)
		}
		lc, _, _ := realClient(t, multiRoundPlan, front, mcp.LATEST_LEGACY_PROTOCOL_VERSION, &askedHandlers{}, "--mode", "multi-round")
		if got := lc.GetServerCapabilities(); got.Resources == nil || !got.Resources.Subscribe {
			b, _ := json.Marshal(got)
			t.Errorf("%s: the legacy client was told %s, want resources/subscribe", front, b)
		}
	}
}

// TestLogMessagesAsTheClientAsked: the test upstream in its legacy era logs
// three info messages in a call whatever was asked. A client of 2025-11-25
// gets them (routeLog); mcp-go's client of 2026-07-28 gets them only when
// its request asked for info or below (its SetLevel puts the level in each
// request's _meta), none when it asked for none or for error, over stdio
// (the fast lane) and HTTP. (mcp-go's server may write the last message
// after its answer, and a message that trails the call is not the call's:
// a modern client gets one to three of them.)
func TestLogMessagesAsTheClientAsked(t *testing.T) {
	for _, front := range []string{"stdio", "http"} {
		for _, tc := range []struct {
			version string
			level   mcp.LoggingLevel
			some    bool // one to three, else none
		}{
			{"", "", false},
			{"", mcp.LoggingLevelError, false},
			{"", mcp.LoggingLevelInfo, true},
			{"", mcp.LoggingLevelDebug, true},
			{mcp.LATEST_LEGACY_PROTOCOL_VERSION, "", true},
		} {
			t.Run(front+"/"+tc.version+"/"+string(tc.level), func(t *testing.T) {
				c, p, _ := realClient(t, httpFastPlan, front, tc.version, &askedHandlers{}, "--conformance")
				var logs atomic.Int32
				c.OnNotification(func(n mcp.JSONRPCNotification) {
					if n.Method == "notifications/message" {
						logs.Add(1)
					}
				})
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				if tc.level != "" {
					lr := mcp.SetLevelRequest{}
					lr.Params.Level = tc.level
					//lint:ignore SA1019 the level a client asks for is what is tested
					if err := c.SetLevel(ctx, lr); err != nil {
						t.Fatal(err)
					}
				}
				taken := p.fastTaken.Load()
				req := mcp.CallToolRequest{}
				req.Params.Name = "test_tool_with_logging"
				if res, err := c.CallTool(ctx, req); err != nil || res.IsError {
					t.Fatalf("call: %v %+v", err, res)
				}
				if tc.some && !eventually(func() bool { return logs.Load() > 0 }) {
					t.Fatal("the client got no log message")
				}
				// A second call: a log message the upstream wrote before
				// its first answer is on the wire by the second answer.
				req.Params.Name = "echo"
				req.Params.Arguments = map[string]any{"message": "x"}
				if res, err := c.CallTool(ctx, req); err != nil || res.IsError {
					t.Fatalf("echo: %v %+v", err, res)
				}
				if n := logs.Load(); tc.some && (n < 1 || n > 3) || !tc.some && n != 0 {
					t.Errorf("the client got %d log messages, want %s", n, map[bool]string{true: "one to three", false: "none"}[tc.some])
				}
				if tc.version == "" && p.fastTaken.Load() == taken {
					t.Errorf("no call took the fast lane")
				}
			})
		}
	}
}

// TestNoLogMessageToAStdioClientThatSkipsDiscover: a stdio client whose
// first request is a modern tools/call (no server/discover, no initialize)
// gets the call's answer and no log message.
func TestNoLogMessageToAStdioClientThatSkipsDiscover(t *testing.T) {
	p, l, _ := laneProxy(t, httpFastPlan, true, nil, "--conformance")
	ctx, cancel := context.WithCancel(context.Background())
	cr, pw := io.Pipe()
	pr, cw := io.Pipe()
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = p.ServeStdio(ctx, cr, cw)
	}()
	defer func() { pr.Close(); pw.Close(); cancel(); <-served; l.Close() }()
	if err := p.WaitUpstream(ctx); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	send := func(s string) {
		if _, err := io.WriteString(pw, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	upTo := func(id string) {
		for line := range lines {
			got = append(got, line)
			if strings.Contains(line, `"id":`+id+`,`) || len(got) > 50 {
				return
			}
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_tool_with_logging","arguments":{},` + modernMeta + `}}`)
	upTo("1")
	// A second call: a log message the upstream wrote before its first
	// answer would be on the wire before this answer.
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"x"},` + modernMeta + `}}`)
	upTo("2")
	all := strings.Join(got, "\n")
	if !strings.Contains(all, `"id":1,`) || !strings.Contains(all, `"id":2,`) || strings.Contains(all, `"isError":true`) || strings.Contains(all, "notifications/message") {
		t.Errorf("the stdio client got:\n%s", all)
	}
}
