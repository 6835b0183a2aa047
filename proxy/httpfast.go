package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/planlock/planlock/internal/wire"
)

// The HTTP fast lane. mcp-go's streamable HTTP server decodes a POSTed
// tools/call about five times (envelope, protocol era, message, _meta,
// params), starts a goroutine to forward the session's notifications and
// encodes the answer reflectively: together more than the gate, the count
// and both audit records of the call. The lane reads a plain tools/call (of
// an initialised session, or of protocol 2026-07-28, which has none) with
// one validating scan (internal/wire), runs it on the request's goroutine
// through the same middleware and handler the server would (serveCall:
// openCall → Decide → act → run → forward), and writes the answer the
// server would for the request's era (laneera.go): multi-round retries and
// calls of steps with an input block included. Anything else (another
// method, a task, an unknown tool, an id in flight already, a _meta,
// header or session the server would refuse or treat differently, a
// session with notifications waiting for it, a legacy client's call that
// may ask it for input on the POST's stream) goes to the server unchanged.
//
// What the server's forwarder would write on the call's response, an
// upstream log message routed to the call (routeLog) or the call's
// progress (relayNotification), the lane writes too, turning the answer
// into an event stream as the server does.
// Notifications not for the call (list changes) wait in the session's
// queue for the session's GET stream or next request; a request that
// finds them waiting goes to the server, which writes them.

// httpLane is the fast lane in front of one streamable HTTP server.
type httpLane struct {
	p    *Proxy
	next http.Handler

	mu    sync.Mutex
	calls map[string]context.CancelFunc // cancelKey → the call's cancel
}

// fastHTTP puts the HTTP fast lane in front of next (the MCP server's handler).
func (p *Proxy) fastHTTP(next http.Handler) http.Handler {
	if p.noFastLane {
		return next
	}
	return &httpLane{p: p, next: next, calls: map[string]context.CancelFunc{}}
}

func (l *httpLane) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.Body == nil || r.Header.Get("Content-Type") != "application/json" {
		l.next.ServeHTTP(w, r)
		return
	}
	v := r.Header.Get(mcp.HeaderProtocolVersion)
	modern := mcp.IsModernProtocol(v)
	var sid string
	var sess server.ClientSession
	switch {
	case rebinding(r) || (v != "" && !mcp.IsValidProtocolVersion(v)):
		l.next.ServeHTTP(w, r)
		return
	case modern:
		// No session (checkSession took off any ID): a session of the
		// request's own, as the server gives each modern request.
		sess = newLaneSession()
	default:
		sid = r.Header.Get(server.HeaderKeySessionID)
		if sid != "" {
			sess = l.p.registeredSession(sid)
		}
		// Notifications waiting for the session go out with the server's
		// next answer to it, as they would have with the last one's.
		if sess == nil || len(sess.NotificationChannel()) > 0 {
			l.next.ServeHTTP(w, r)
			return
		}
	}
	body, err := readBody(r)
	if err == nil && l.take(w, r, sid, sess, modern, body) {
		return
	}
	// The server reads the body as it came, read error included.
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
	l.next.ServeHTTP(w, r)
}

// take answers a plain tools/call, or a cancellation of one the lane is
// running; false leaves the request to the server. modern: the request's
// header names protocol 2026-07-28, and sid is "".
func (l *httpLane) take(w http.ResponseWriter, r *http.Request, sid string, sess server.ClientSession, modern bool, body []byte) bool {
	env, ok := wire.ScanEnvelope(body)
	if !ok || env.Result != nil || env.Err != nil {
		return false
	}
	if v, _ := wire.PlainString(env.JSONRPC); v != mcp.JSONRPC_VERSION {
		return false
	}
	switch method, _ := wire.PlainString(env.Method); method {
	case string(mcp.MethodToolsCall):
		return env.ID != nil && l.call(w, r, sid, sess, modern, env.ID, env.Params)
	case string(mcp.MethodNotificationCancelled):
		if env.ID == nil && (!modern || modernNotification(r.Header, env.Params)) && l.cancel(sid, env.Params) {
			w.WriteHeader(http.StatusAccepted) // the server's answer to a notification
			return true
		}
	}
	return false
}

// call runs a tools/call as the server would; false when it is not plain.
func (l *httpLane) call(w http.ResponseWriter, r *http.Request, sid string, sess server.ClientSession, modern bool, id, params json.RawMessage) bool {
	key, ok := cancelKey(sid, id)
	if !ok {
		return false
	}
	if id, ok = wire.ServerID(id); !ok { // the id the server would answer with
		return false
	}
	ps, whole, ok := l.p.laneParams(params)
	if !ok {
		return false
	}
	// The era is the header's and the body's alike (else the server
	// answers the mismatch).
	era, ok := readLaneEra(ps.Meta)
	if !ok || era.modern() != modern || modern && !l.p.modernHeaders(r.Header, era, ps.Name, params) {
		return false
	}
	// A legacy client is asked for a round's input during the call, with a
	// request on the POST's own event stream, which the server's transport
	// carries (and routes the client's answer back).
	if whole && !modern && asksInput(l.p.cur.Load().plan, ps.Name) {
		return false
	}
	ctx, cancel := context.WithCancel(l.p.eraContext(l.p.srv.WithContext(r.Context(), sess), era))
	defer cancel()
	l.mu.Lock()
	if _, busy := l.calls[key]; busy {
		l.mu.Unlock()
		return false
	}
	l.calls[key] = cancel
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.calls, key)
		l.mu.Unlock()
	}()
	l.p.fastTaken.Add(1)
	hc := &httpCall{w: w, p: l.p, modern: modern}
	ctx = withResponder(ctx, hc)
	req := mcp.CallToolRequest{}
	req.Method = string(mcp.MethodToolsCall)
	req.Header = r.Header
	req.Params.Name = ps.Name
	req.Params.RawArguments = ps.Arguments
	req.Params.Meta = era.meta
	req.Params.MultiRoundTripParams = ps.roundTrip
	defer hc.runAfter() // after the answer, whatever happens to it
	res, err := l.p.serveCall(ctx, req)
	hc.answer(id, res, err, l.p.cfg.Log)
	return true
}

// modernNotification reports whether the server's transport takes a
// modern notification (validateModernRequest): its _meta names the
// header's version, and no Last-Event-ID.
func modernNotification(h http.Header, params json.RawMessage) bool {
	var ps struct {
		Meta *mcp.Meta `json:"_meta"`
	}
	return json.Unmarshal(params, &ps) == nil && h.Get(mcp.HeaderLastEventID) == "" &&
		ps.Meta.ProtocolVersion() == h.Get(mcp.HeaderProtocolVersion)
}

// cancel carries out a notifications/cancelled for a call the lane is
// running; false when it names none of them. A modern request's key has
// no session ID, as the server keys its ephemeral sessions' calls.
func (l *httpLane) cancel(sid string, params json.RawMessage) bool {
	var ps struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(params, &ps) != nil || ps.RequestID == nil {
		return false
	}
	key := sid + ":" + fmt.Sprint(ps.RequestID) // as the server keys its calls in flight
	l.mu.Lock()
	cancel, ok := l.calls[key]
	delete(l.calls, key)
	l.mu.Unlock()
	if ok {
		cancel()
	}
	return ok
}

// cancelKey is how the server finds a call in flight from a cancellation:
// the session ID and the request id as decoded into a Go value, printed.
// ok is false for an id that is neither a string nor a number.
func cancelKey(sid string, id json.RawMessage) (string, bool) {
	if !wire.PlainID(id) {
		var v any
		if json.Unmarshal(id, &v) != nil {
			return "", false
		}
		switch v.(type) {
		case string, float64:
			return sid + ":" + fmt.Sprint(v), true // as cancel prints it
		}
		return "", false
	}
	if s, ok := wire.PlainString(id); ok {
		return sid + ":" + s, true
	}
	digits := len(id)
	if id[0] == '-' {
		digits--
	}
	if digits <= 6 {
		// Printed as written: %v prints a float64 in %e form only from
		// seven digits on (and wire.PlainID allows no leading zero or -0).
		return sid + ":" + string(id), true
	}
	f, err := strconv.ParseFloat(string(id), 64)
	if err != nil {
		return "", false
	}
	return sid + ":" + fmt.Sprint(f), true
}

// httpCall is the response of a call on the HTTP fast lane: notifications
// for the call, then its answer, as the server writes them.
type httpCall struct {
	w       http.ResponseWriter
	p       *Proxy
	modern  bool // a request of protocol 2026-07-28: its result is decorated
	mu      sync.Mutex
	pending [][]byte // events not yet written
	stream  bool     // the response is an event stream
	done    bool     // answered: nothing more is written
	after   []func() // run once the answer is sent (the request's goroutine only)
}

// afterAnswer runs f once the answer is on its way to the client: a
// success's outcome record (ledger.CompleteLater), which is then often
// written together with another call's record.
func (c *httpCall) afterAnswer(f func()) { c.after = append(c.after, f) }

func (c *httpCall) runAfter() {
	for _, f := range c.after {
		f()
	}
}

// notify writes a notification on the call's response (not on the
// caller's goroutine, the upstream's reader); false once it is answered.
func (c *httpCall) notify(method string, params map[string]any) bool {
	b, err := json.Marshal(mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: method, Params: mcp.NotificationParams{AdditionalFields: params}}})
	if err != nil {
		return false
	}
	c.mu.Lock()
	if c.done {
		c.mu.Unlock()
		return false
	}
	c.pending = append(c.pending, b)
	first := len(c.pending) == 1
	c.mu.Unlock()
	if first {
		go func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.flush()
		}()
	}
	return true
}

// flush writes the pending events, turning the response into an event
// stream first; c.mu is held.
func (c *httpCall) flush() {
	if len(c.pending) == 0 {
		return
	}
	for _, b := range c.pending {
		c.event(b)
	}
	c.pending = nil
	_ = http.NewResponseController(c.w).Flush()
}

func (c *httpCall) event(b []byte) {
	if !c.stream {
		h := c.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Connection", "keep-alive")
		h.Set("Cache-Control", "no-cache")
		c.w.WriteHeader(http.StatusOK)
		c.stream = true
	}
	out := make([]byte, 0, len(b)+32)
	out = append(out, "event: message\ndata: "...)
	out = append(out, b...)
	_, _ = c.w.Write(append(out, "\n\n"...))
}

// answer writes the call's answer (res, or the handler's error as the
// server answers it) after the notifications before it.
func (c *httpCall) answer(id json.RawMessage, res *mcp.CallToolResult, herr error, log io.Writer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flush()
	c.done = true
	b := make([]byte, 0, 256)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	var err error
	switch {
	case herr != nil:
		var e []byte
		e, err = json.Marshal(mcp.NewJSONRPCErrorDetails(mcp.INTERNAL_ERROR, herr.Error(), nil))
		b = append(append(append(b, `,"error":`...), e...), '}')
	default:
		b, err = c.p.appendEraResult(append(b, `,"result":`...), res, c.modern)
		b = append(b, '}')
	}
	if err != nil {
		fmt.Fprintf(log, "planlock proxy: encode a message to the client: %v\n", err)
		return
	}
	if c.stream {
		c.event(b)
		_ = http.NewResponseController(c.w).Flush()
		return
	}
	b = append(b, '\n')
	h := c.w.Header()
	h.Set("Content-Type", "application/json")
	if len(c.after) > 0 {
		// Sent now, whole (as the server's, whose length net/http sets
		// when the handler returns), not after what runs after it.
		h.Set("Content-Length", strconv.Itoa(len(b)))
	}
	c.w.WriteHeader(http.StatusOK)
	_, _ = c.w.Write(b)
	if len(c.after) > 0 {
		_ = http.NewResponseController(c.w).Flush()
	}
}

// readBody reads a request's body whole.
func readBody(r *http.Request) ([]byte, error) {
	n := r.ContentLength
	if n < 0 || n > 64<<10 {
		// Not allocated ahead on the client's word: grown as it comes.
		return io.ReadAll(r.Body)
	}
	b := make([]byte, 0, n+1) // +1: the read that finds the end needs no growth
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		m, err := r.Body.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// errReader returns err (io.EOF when nil).
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err == nil {
		return 0, io.EOF
	}
	return 0, e.err
}

// rebinding reports whether the server would refuse r as a DNS rebinding
// attempt: it came to a loopback address naming a host that is not one.
func rebinding(r *http.Request) bool {
	if loopbackHost(r.Host) {
		return false
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && local != nil && loopbackHost(local.String())
}

// loopbackHost is the server's test of a host (with or without a port).
func loopbackHost(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

var (
	_ afterAnswerer = (*httpCall)(nil)
	_ callNotifier  = (*httpCall)(nil)
)
