package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/planlock/planlock/internal/testkit/peers"
	"github.com/planlock/planlock/proxy/ledger"
)

// frontPlan allows the test upstream's echo, slow and flood.
const frontPlan = `
plan "front" {
  goal  = "the HTTP front"
  order = "any"
  step "echo" {
    tool      = "echo"
    max_calls = 1000000
    arg "message" { max_length = 100 }
  }
  step "slow" {
    tool      = "slow"
    max_calls = 1000
    arg "ms" { max = 60000 }
  }
  step "flood" {
    tool      = "flood"
    max_calls = 1000
  }
}`

// serveFront serves frontPlan in process on a real loopback listener with
// the HTTP options o until the test ends; it returns the URL, the proxy and
// its log.
func serveFront(t *testing.T, o HTTPOptions) (string, *Proxy, *peers.SyncBuffer) {
	t.Helper()
	p, _ := newInProcessProxy(t, frontPlan, nil, ledger.Options{})
	logb := &peers.SyncBuffer{}
	p.cfg.Log = logb
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := p.ServeListenerWith(ctx, ln, o); err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	if err := p.WaitUpstream(ctx); err != nil {
		t.Fatal(err)
	}
	return "http://" + ln.Addr().String() + "/mcp", p, logb
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// rawDo sends one request to the proxy; headers are set when not empty.
func rawDo(t *testing.T, method, url, token, session, origin, body string) (int, string, http.Header) {
	t.Helper()
	return peers.RawHTTP(t, method, url, token, session, origin, body)
}

// initSession initialises a session as token and returns its ID.
func initSession(t *testing.T, url, token string) string {
	t.Helper()
	code, body, h := rawDo(t, http.MethodPost, url, token, "", "", initBody)
	sid := h.Get(server.HeaderKeySessionID)
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: HTTP %d, session %q: %s", code, sid, body)
	}
	return sid
}

func TestHTTPOriginIsChecked(t *testing.T) {
	const tok = "origin-token"
	url, _, _ := serveFront(t, HTTPOptions{Tokens: []string{tok}, AllowOrigins: []string{"https://app.example"}})
	port := url[len("http://127.0.0.1:") : len(url)-len("/mcp")]
	tests := []struct {
		name, origin, token string
		want                int
	}{
		{"no Origin (not a browser) goes on to auth", "", tok, http.StatusOK},
		{"no Origin and no token is 401", "", "", http.StatusUnauthorized},
		{"foreign origin", "http://evil.example", tok, http.StatusForbidden},
		{"foreign origin refused before auth", "http://evil.example", "", http.StatusForbidden},
		{"rebinding name on our port", "http://evil.example:" + port, tok, http.StatusForbidden},
		{"opaque origin", "null", tok, http.StatusForbidden},
		{"loopback on another port", "http://127.0.0.1:1", tok, http.StatusForbidden},
		{"https on our port is another origin", "https://127.0.0.1:" + port, tok, http.StatusForbidden},
		{"the listen address", "http://127.0.0.1:" + port, tok, http.StatusOK},
		{"localhost on our port", "http://localhost:" + port, tok, http.StatusOK},
		{"allow-listed origin", "https://app.example", tok, http.StatusOK},
		{"allow-listed origin with default port and capitals", "https://APP.example:443", tok, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body, _ := rawDo(t, http.MethodPost, url, tt.token, "", tt.origin, initBody)
			if code != tt.want {
				t.Fatalf("HTTP %d, want %d: %s", code, tt.want, body)
			}
			if code == http.StatusForbidden && (strings.Count(strings.TrimSpace(body), "\n") != 0 || !strings.Contains(body, "is not allowed")) {
				t.Fatalf("403 body is not one line naming the refusal: %q", body)
			}
		})
	}
}

func TestHTTPSessionsAreIssuedAndOwned(t *testing.T) {
	const tokA, tokB = "token-of-a", "token-of-b"
	url, _, _ := serveFront(t, HTTPOptions{Tokens: []string{tokA, tokB}})
	const list = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	// Well formed, as mcp-go issues them, but never issued by this proxy.
	const forged = "mcp-session-0b7c3a9e-6a53-4a8e-9d1f-2f4a1c9b8e70"
	sidA := initSession(t, url, tokA)
	tests := []struct {
		name, method, token, session, body string
		want                               int
	}{
		{"owner lists tools", http.MethodPost, tokA, sidA, list, http.StatusOK},
		{"forged session on POST", http.MethodPost, tokA, forged, list, http.StatusNotFound},
		{"forged session on GET stream", http.MethodGet, tokA, forged, "", http.StatusNotFound},
		{"forged session on DELETE", http.MethodDelete, tokA, forged, "", http.StatusNotFound},
		{"another identity on POST", http.MethodPost, tokB, sidA, list, http.StatusNotFound},
		{"another identity on GET stream", http.MethodGet, tokB, sidA, "", http.StatusNotFound},
		{"another identity on DELETE", http.MethodDelete, tokB, sidA, "", http.StatusNotFound},
		{"GET without a session", http.MethodGet, tokA, "", "", http.StatusBadRequest},
		{"DELETE without a session", http.MethodDelete, tokA, "", "", http.StatusBadRequest},
		{"owner still lists tools after the attempts", http.MethodPost, tokA, sidA, list, http.StatusOK},
		{"owner ends the session", http.MethodDelete, tokA, sidA, "", http.StatusOK},
		{"an ended session is unknown", http.MethodPost, tokA, sidA, list, http.StatusNotFound},
	}
	for _, tt := range tests { // in order: the last rows depend on the first
		code, body, _ := rawDo(t, tt.method, url, tt.token, tt.session, "", tt.body)
		if code != tt.want {
			t.Errorf("%s: HTTP %d, want %d: %s", tt.name, code, tt.want, body)
		}
	}
}

// connectFront connects an mcp-go client with a bearer token and a GET
// stream (as the TypeScript SDK opens one), counting log messages.
func connectFront(t *testing.T, ctx context.Context, url, token string, logs *atomic.Int64) *client.Client {
	t.Helper()
	//lint:ignore SA1019 the GET stream of the 2025 protocol versions, as the TypeScript SDK opens one
	tr, err := transport.NewStreamableHTTP(url, transport.WithContinuousListening(),
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/message" {
			logs.Add(1)
		}
	})
	startClient(t, ctx, c)
	t.Cleanup(func() { c.Close() })
	return c
}

func callTool(ctx context.Context, c *client.Client, name string, args map[string]any) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	return c.CallTool(ctx, req)
}

// waitFor polls cond (a hang guard, not a latency bound).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHTTPLogMessagesGoToTheirSessionOnly: an upstream log message reaches
// the session whose call alone is in flight, not the other connected
// sessions; once a second bearer identity has made calls, log messages
// cannot be attributed (one may trail the call that caused it) and are
// dropped, with a line in the log, instead of reaching that identity.
func TestHTTPLogMessagesGoToTheirSessionOnly(t *testing.T) {
	ctx := context.Background()
	url, p, logb := serveFront(t, HTTPOptions{Tokens: []string{"tok-a", "tok-b"}})
	var logsA, logsA2, logsB atomic.Int64
	a := connectFront(t, ctx, url, "tok-a", &logsA)
	connectFront(t, ctx, url, "tok-a", &logsA2) // a second session of the same identity, idle
	b := connectFront(t, ctx, url, "tok-b", &logsB)
	flood := func(until func() bool) {
		t.Helper()
		fctx, fcancel := context.WithCancel(ctx)
		fdone := make(chan struct{})
		go func() { defer close(fdone); _, _ = callTool(fctx, a, "flood", nil) }()
		waitFor(t, "the flood", until)
		fcancel()
		<-fdone
	}
	dropped := func() int {
		p.inflight.mu.Lock()
		defer p.inflight.mu.Unlock()
		return p.inflight.total
	}

	// A floods alone: A gets the messages, the idle sessions none.
	flood(func() bool { return logsA.Load() >= 20 })
	if n, m := logsA2.Load(), logsB.Load(); n != 0 || m != 0 {
		t.Fatalf("idle sessions got session A's log messages: same identity %d, other identity %d", n, m)
	}

	// B calls: from now on two identities share the upstream, and what A's
	// flood logs is dropped, never shown to B.
	if res, err := callTool(ctx, b, "echo", map[string]any{"message": "hi"}); err != nil || res.IsError {
		t.Fatalf("B's echo: %v %+v", err, res)
	}
	before := dropped()
	flood(func() bool { return dropped() >= before+20 })
	if res, err := callTool(ctx, b, "echo", map[string]any{"message": "hi"}); err != nil || res.IsError {
		t.Fatalf("B's echo: %v %+v", err, res)
	}
	if n := logsB.Load(); n != 0 {
		t.Fatalf("session B got %d of session A's log messages", n)
	}
	if !strings.Contains(logb.String(), "upstream log message(s)") {
		t.Fatalf("no drop line in the log:\n%s", logb.String())
	}
}

// closedByServer reads c until the server closes it; a read that hits the
// test's own hang guard means the server never did.
func closedByServer(c net.Conn) error {
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := io.Copy(io.Discard, c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("still open after %d bytes: the server did not close it", n)
	}
	return nil
}

// writesRefused writes to c until the server's side refuses the bytes; a
// write that hits the test's own hang guard means the server still has the
// connection open (and stopped reading it).
func writesRefused(c net.Conn) error {
	guard := time.Now().Add(30 * time.Second)
	_ = c.SetWriteDeadline(guard)
	for time.Now().Before(guard) {
		if _, err := c.Write([]byte("x")); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.New("still open: the server did not close it")
}

// TestHTTPSlowClientsDoNotExhaustTheServer: 200 connections sending their
// headers slowly and 200 sending their bodies slowly do not keep a normal
// client from being served, and the server closes them all; an idle
// keep-alive connection is closed too.
func TestHTTPSlowClientsDoNotExhaustTheServer(t *testing.T) {
	const tok, slow = "slow-token", 200
	url, _, _ := serveFront(t, HTTPOptions{Tokens: []string{tok},
		ReadHeaderTimeout: time.Second, BodyTimeout: time.Second, IdleTimeout: time.Second})
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	kinds := map[string]string{
		"partial headers": "POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\n",
		"slow body": "POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + tok +
			"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\":",
	}
	type hanging struct {
		kind string
		c    net.Conn
	}
	var conns []hanging
	for kind, start := range kinds {
		for range slow {
			c := dial()
			if _, err := io.WriteString(c, start); err != nil {
				t.Fatal(err)
			}
			conns = append(conns, hanging{kind, c})
		}
	}
	// The partial-header connections keep trickling a header line.
	stop := make(chan struct{})
	var trickle sync.WaitGroup
	for _, h := range conns {
		if h.kind != "partial headers" {
			continue
		}
		trickle.Add(1)
		go func() {
			defer trickle.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				if _, err := fmt.Fprintf(h.c, "X-Slow-%d: 1\r\n", i); err != nil {
					return
				}
			}
		}()
	}
	defer func() { close(stop); trickle.Wait() }()

	// A normal client is served while they hang.
	ctx := context.Background()
	var logs atomic.Int64
	c := connectFront(t, ctx, url, tok, &logs)
	if res, err := callTool(ctx, c, "echo", map[string]any{"message": "still served"}); err != nil || res.IsError {
		t.Fatalf("normal client: %v %+v", err, res)
	}

	// An idle keep-alive connection after a complete request.
	idle := dial()
	req := "POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + tok +
		"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: " +
		fmt.Sprint(len(initBody)) + "\r\n\r\n" + initBody
	if _, err := io.WriteString(idle, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("idle connection's request: %v %v", err, resp)
	}
	conns = append(conns, hanging{"idle keep-alive", idle})

	var wg sync.WaitGroup
	errs := make(chan string, len(conns))
	for _, h := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := closedByServer(h.c); err != nil {
				errs <- h.kind + ": " + err.Error()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestHTTPStreamsOutliveTheTimeouts: the body and write timeouts are per
// request and per write, so a GET stream open for many times their length
// still delivers.
func TestHTTPStreamsOutliveTheTimeouts(t *testing.T) {
	const tok = "stream-token"
	url, p, _ := serveFront(t, HTTPOptions{Tokens: []string{tok}, BodyTimeout: 100 * time.Millisecond,
		WriteTimeout: 100 * time.Millisecond, IdleTimeout: 100 * time.Millisecond})
	sid := initSession(t, url, tok)
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set(server.HeaderKeySessionID, sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: HTTP %d", resp.StatusCode)
	}
	time.Sleep(time.Second) // ten times every timeout; not a latency bound
	if err := p.srv.SendNotificationToSpecificClient(sid, "notifications/message", map[string]any{"level": "info", "data": "late"}); err != nil {
		t.Fatalf("the stream's session is gone: %v", err)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"late"`) {
			return
		}
	}
	t.Fatalf("the stream ended before the notification: %v", sc.Err())
}

// TestHTTPWriteTimeoutCutsAStalledReader: a GET stream whose client stops
// reading is closed once a write cannot complete within WriteTimeout.
func TestHTTPWriteTimeoutCutsAStalledReader(t *testing.T) {
	const tok = "stall-token"
	url, p, _ := serveFront(t, HTTPOptions{Tokens: []string{tok}, WriteTimeout: 300 * time.Millisecond})
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	sid := initSession(t, url, tok)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(c, "GET /mcp HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nAuthorization: Bearer %s\r\n%s: %s\r\n\r\n", addr, tok, server.HeaderKeySessionID, sid)
	// Wait until the stream is registered, then fill it without reading.
	big := strings.Repeat("x", 64<<10)
	waitFor(t, "the GET stream", func() bool {
		return p.srv.SendNotificationToSpecificClient(sid, "notifications/message", map[string]any{"level": "info", "data": "first"}) == nil
	})
	for range 200 {
		_ = p.srv.SendNotificationToSpecificClient(sid, "notifications/message", map[string]any{"level": "info", "data": big})
	}
	time.Sleep(time.Second) // let a stalled write outlast WriteTimeout; not a latency bound
	// The server must have closed the connection: what the client sends
	// now is refused (a reset) instead of being read.
	if err := writesRefused(c); err != nil {
		t.Fatalf("stalled GET stream: %v", err)
	}
}

// TestHTTPBodyLimit: through a real net/http server, limitBody lets the
// MCP server read at most max bytes of a body, whether its length is
// declared (refused before it is read when over max) or not (chunked: cut
// while read).
func TestHTTPBodyLimit(t *testing.T) {
	const max = 64
	type seen struct {
		n   int
		err error
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(limitBody(max, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		got <- seen{len(b), err}
	})))
	defer srv.Close()
	for _, tc := range []struct {
		name    string
		size    int
		chunked bool
		code    int  // the answer
		read    int  // bytes the handler read; -1: not called
		tooBig  bool // the handler's read failed with *http.MaxBytesError
	}{
		{name: "declared, at the limit", size: max, code: http.StatusOK, read: max},
		{name: "declared, over the limit", size: max + 1, code: http.StatusRequestEntityTooLarge, read: -1},
		{name: "chunked, at the limit", size: max, chunked: true, code: http.StatusOK, read: max},
		{name: "chunked, over the limit", size: 10 * max, chunked: true, code: http.StatusOK, read: max, tooBig: true},
		{name: "empty", size: 0, code: http.StatusOK, read: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader = strings.NewReader(strings.Repeat("x", tc.size))
			if tc.chunked {
				body = io.MultiReader(body) // no length known: sent chunked
			}
			req, err := http.NewRequest(http.MethodPost, srv.URL, body)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Errorf("HTTP %d, want %d", resp.StatusCode, tc.code)
			}
			var s seen
			select {
			case s = <-got:
			default:
				s.n = -1
			}
			var mbe *http.MaxBytesError
			if s.n != tc.read || errors.As(s.err, &mbe) != tc.tooBig || (!tc.tooBig && s.err != nil) {
				t.Errorf("the handler read %d bytes (%v), want %d (too big: %v)", s.n, s.err, tc.read, tc.tooBig)
			}
		})
	}
}

// TestHTTPExtrasAreNotServedWithoutTheirBlocks: a plan without resource or
// prompt blocks exposes neither, so their methods are unknown to the
// client (-32601) whatever their params, over HTTP as over stdio.
func TestHTTPExtrasAreNotServedWithoutTheirBlocks(t *testing.T) {
	url, _, _ := serveFront(t, HTTPOptions{})
	sid := initSession(t, url, "")
	for i, m := range []string{
		`"method":"resources/read","params":{"uri":"file:///etc/passwd"}`,
		`"method":"resources/subscribe","params":{"uri":"file:///etc/passwd"}`,
		`"method":"resources/unsubscribe","params":"not an object"`,
		`"method":"resources/list"`,
		`"method":"prompts/get","params":{"name":"p"}`,
		`"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"b"}}`,
	} {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,%s}`, i+2, m)
		code, text, _ := rawDo(t, http.MethodPost, url, "", sid, "", body)
		if code != http.StatusOK || !strings.Contains(text, `"code":-32601`) {
			t.Errorf("%s: HTTP %d %s, want method not found", m, code, text)
		}
	}
}
