package proxy

// The HTTP front of ServeListenerWith: origin check, bearer identities, sessions
// bound to the identity that created them, per-request deadlines, and the
// routing of upstream log messages to one session.

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// HTTPOptions configures the streamable HTTP front (ServeListenerWith).
type HTTPOptions struct {
	// Tokens are the accepted bearer tokens; each is its own identity, and a
	// session is bound to the identity that created it. None means no
	// authentication (every request is the same anonymous identity).
	Tokens []string
	// AllowOrigins are the origins ("scheme://host[:port]") a request with
	// an Origin header may come from, besides the listen address itself.
	AllowOrigins []string
	// ReadHeaderTimeout bounds reading a request's headers (default 10s).
	ReadHeaderTimeout time.Duration
	// BodyTimeout bounds reading a request's body (default 30s).
	BodyTimeout time.Duration
	// WriteTimeout bounds each write of a response; a stream stays open as
	// long as its writes progress (default 30s).
	WriteTimeout time.Duration
	// IdleTimeout bounds how long a keep-alive connection waits for its next
	// request (default 120s).
	IdleTimeout time.Duration
}

func (o *HTTPOptions) defaults() {
	if o.ReadHeaderTimeout <= 0 {
		o.ReadHeaderTimeout = 10 * time.Second
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = 30 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 30 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 120 * time.Second
	}
}

// NormalizeOrigin checks an allowed origin and returns it in the form a
// browser sends: lower-case scheme and host, no default port, no path.
func NormalizeOrigin(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("origin %q: %w", s, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", fmt.Errorf("origin %q: want scheme://host[:port] with scheme http or https and nothing after the host", s)
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return strings.ToLower(u.Scheme) + "://" + host, nil
}

// ownOrigins are the origins of the listen address itself: for loopback
// http://127.0.0.1:PORT, http://localhost:PORT and http://[::1]:PORT; for
// another specific address http://ADDR:PORT; none for a wildcard address.
func ownOrigins(addr net.Addr) []string {
	ta, ok := addr.(*net.TCPAddr)
	if !ok || ta.IP.IsUnspecified() {
		return nil
	}
	port := strconv.Itoa(ta.Port)
	if ta.IP.IsLoopback() {
		return []string{"http://127.0.0.1:" + port, "http://localhost:" + port, "http://[::1]:" + port}
	}
	return []string{"http://" + net.JoinHostPort(ta.IP.String(), port)}
}

// checkOrigin refuses, with 403, a request whose Origin header is not
// allowed (the streamable HTTP transport's defence against DNS rebinding).
// A request without Origin (not from a browser) passes.
func checkOrigin(allowed map[string]bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vals := r.Header.Values("Origin")
		if len(vals) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		o, err := NormalizeOrigin(vals[0])
		if len(vals) != 1 || err != nil || !allowed[o] {
			http.Error(w, fmt.Sprintf("planlock: origin %q is not allowed (allow it with --allow-origin)", printable(vals[0])), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// printable shortens an untrusted header value and masks control characters.
func printable(s string) string {
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

type identityKey struct{}

// identityOf is the identity authBearer found for the request.
func identityOf(r *http.Request) (string, bool) {
	if r == nil {
		return "", false
	}
	id, ok := r.Context().Value(identityKey{}).(string)
	return id, ok
}

// authBearer answers 401 unless the request carries one of the tokens, and
// records which one (its index) as the request's identity. Without tokens
// every request is the anonymous identity.
func authBearer(tokens []string, next http.Handler) http.Handler {
	wants := make([][]byte, len(tokens))
	for i, t := range tokens {
		wants[i] = []byte("Bearer " + t)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := "anonymous"
		if len(wants) > 0 {
			got := []byte(r.Header.Get("Authorization"))
			found := -1
			for i, want := range wants { // every token compared: no early exit
				if subtle.ConstantTimeCompare(got, want) == 1 {
					found = i
				}
			}
			if found < 0 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="planlock"`)
				http.Error(w, "planlock: missing or wrong bearer token", http.StatusUnauthorized)
				return
			}
			id = "token-" + strconv.Itoa(found)
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, id)))
	})
}

// sessionIDs are the session IDs the proxy issued, each with the identity
// that created it. mcp-go's default accepts any well-formed ID; this one
// knows only its own.
type sessionIDs struct {
	mu    sync.Mutex
	owner map[string]string
}

func (s *sessionIDs) lookup(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.owner[id]
	return o, ok
}

// ResolveSessionIdManager gives mcp-go a manager bound to the request's
// identity (none for the server's own calls at shutdown).
func (s *sessionIDs) ResolveSessionIdManager(r *http.Request) server.SessionIdManager {
	id, _ := identityOf(r)
	return &boundIDs{ids: s, identity: id, admin: r == nil}
}

// boundIDs issues and checks session IDs for one identity.
type boundIDs struct {
	ids      *sessionIDs
	identity string
	admin    bool
}

func (b *boundIDs) Generate() string {
	id := "mcp-session-" + rand.Text() // 130 random bits
	b.ids.mu.Lock()
	defer b.ids.mu.Unlock()
	if b.ids.owner == nil {
		b.ids.owner = map[string]string{}
	}
	b.ids.owner[id] = b.identity
	return id
}

var errUnknownSession = errors.New("unknown session")

func (b *boundIDs) Validate(id string) (bool, error) {
	if o, ok := b.ids.lookup(id); !ok || o != b.identity {
		return false, errUnknownSession
	}
	return false, nil
}

func (b *boundIDs) Terminate(id string) (bool, error) {
	b.ids.mu.Lock()
	defer b.ids.mu.Unlock()
	if o, ok := b.ids.owner[id]; ok && (b.admin || o == b.identity) {
		delete(b.ids.owner, id)
	}
	return false, nil
}

// checkSession refuses a request naming a session the proxy did not issue
// to this identity with 404, as the transport says for an unknown session:
// another identity's session is unknown to this one, and the answer does
// not tell whether it exists. A GET or DELETE must name a session: without
// one mcp-go would open a stream for a session no one initialised.
//
// Protocol 2026-07-28 has no sessions: a request whose Mcp-Protocol-Version
// header names it is served with its Mcp-Session-Id header ignored (taken
// off, so that nothing after reads a session it did not create), and its
// GET or DELETE gets 405, as the transport says. The era is read from the
// header alone: a modern body without it is refused by mcp-go with 400.
func checkSession(ids *sessionIDs, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
			if r.Method == http.MethodGet || r.Method == http.MethodDelete {
				w.Header().Set("Allow", http.MethodPost)
				http.Error(w, "planlock: "+r.Method+" is not supported in protocol version "+mcp.ProtocolVersion20260728+
					": server-to-client messages use subscriptions/listen", http.StatusMethodNotAllowed)
				return
			}
			r.Header.Del(server.HeaderKeySessionID)
			next.ServeHTTP(w, r)
			return
		}
		sid := r.Header.Get(server.HeaderKeySessionID)
		if sid == "" {
			if r.Method == http.MethodGet || r.Method == http.MethodDelete {
				http.Error(w, "planlock: "+r.Method+" needs the "+server.HeaderKeySessionID+" header of an initialized session", http.StatusBadRequest)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		ident, _ := identityOf(r)
		if o, ok := ids.lookup(sid); !ok || o != ident {
			http.Error(w, "planlock: unknown session (initialize a new one)", http.StatusNotFound)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// deadlines bounds reading a request body by BodyTimeout and each write by
// WriteTimeout, per request (http.ResponseController) rather than per
// connection, so that a long SSE stream stays open while it progresses. The
// read deadline is lifted once the body is read: afterwards the server only
// reads to notice the client going away.
func deadlines(o HTTPOptions, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// One allocation for the request's writer and body wrappers.
		rd := &requestDeadlines{w: deadlineWriter{ResponseWriter: w, conn: connDeadlines(w), d: o.WriteTimeout, start: time.Now()}}
		rd.w.extendAt(rd.w.start)
		if r.Body == nil || r.Body == http.NoBody {
			_ = rd.w.conn.SetReadDeadline(time.Time{})
		} else {
			_ = rd.w.conn.SetReadDeadline(rd.w.start.Add(o.BodyTimeout))
			rd.body = eofBody{ReadCloser: r.Body, conn: rd.w.conn}
			r.Body = &rd.body
		}
		next.ServeHTTP(&rd.w, r)
	})
}

// requestDeadlines is one request's deadline wrappers.
type requestDeadlines struct {
	w    deadlineWriter
	body eofBody
}

// deadliner sets a connection's deadlines: net/http's own response writer
// does, else an http.ResponseController finds the one that does.
type deadliner interface {
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

func connDeadlines(w http.ResponseWriter) deadliner {
	if d, ok := w.(deadliner); ok {
		return d
	}
	return http.NewResponseController(w)
}

// eofBody lifts the read deadline once the body has been read to its end.
type eofBody struct {
	io.ReadCloser
	conn deadliner
	once sync.Once
}

func (b *eofBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.once.Do(func() { _ = b.conn.SetReadDeadline(time.Time{}) })
	}
	return n, err
}

// deadlineWriter gives each write WriteTimeout to complete: a client that
// stops reading is cut off, one that reads a long stream is not.
type deadlineWriter struct {
	http.ResponseWriter
	conn  deadliner
	d     time.Duration
	start time.Time    // of the request (a monotonic reading)
	last  atomic.Int64 // when the deadline was last moved, since start
}

// extendSlack is how stale a write deadline may be before a write moves
// it again, as a fraction of WriteTimeout: moving it is a lock and a timer
// update in the runtime, and a request's answer is usually written right
// after the deadline was set when the request came in. A write still has
// at least 63/64 of WriteTimeout.
const extendSlack = 64

func (w *deadlineWriter) extend() {
	now := time.Now()
	if now.Sub(w.start)-time.Duration(w.last.Load()) < w.d/extendSlack {
		return
	}
	w.extendAt(now)
}

func (w *deadlineWriter) extendAt(now time.Time) {
	w.last.Store(int64(now.Sub(w.start)))
	_ = w.conn.SetWriteDeadline(now.Add(w.d))
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	w.extend()
	return w.ResponseWriter.Write(b)
}

func (w *deadlineWriter) Flush() {
	w.extend()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// callsInFlight records the tool calls being handled, with the client
// session of each, so that an upstream log message can be given to the one
// session it can belong to (routeLog).
type callsInFlight struct {
	mu    sync.Mutex
	n     uint64
	calls map[uint64]context.Context
	// caller is the first identity that made a call; mixed is set once
	// another one has. A log message can trail the call that caused it, so
	// once two identities have used the shared upstream no log message can
	// be attributed to one of them.
	caller string
	mixed  bool

	dropped  int // since the last note
	total    int // ever
	lastNote time.Time
}

func (c *callsInFlight) middleware(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		defer c.track(ctx)()
		return next(ctx, req)
	}
}

// track counts the request of ctx (a tool call, a read, a get: each may
// ask for log messages) as in flight until the returned func runs.
func (c *callsInFlight) track(ctx context.Context) func() {
	ident, _ := ctx.Value(identityKey{}).(string)
	c.mu.Lock()
	if c.calls == nil {
		c.calls = map[uint64]context.Context{}
		c.caller = ident
	} else if ident != c.caller {
		c.mixed = true
	}
	c.n++
	k := c.n
	c.calls[k] = ctx
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.calls, k)
		c.mu.Unlock()
	}
}

// soleSession returns the context of a call in flight when every call in
// flight belongs to one client session and only one identity has ever
// called; false otherwise.
func (c *callsInFlight) soleSession() (context.Context, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mixed {
		return nil, false
	}
	var ctx context.Context
	var sess server.ClientSession
	for _, cctx := range c.calls {
		s := server.ClientSessionFromContext(cctx)
		if s == nil {
			return nil, false
		}
		// Compared as values (pointers), not by ID: requests of the newest
		// protocol have ephemeral sessions with an empty ID.
		if ctx != nil && s != sess {
			return nil, false
		}
		ctx, sess = cctx, s
	}
	return ctx, ctx != nil
}

// noteDrop counts a log message that could not be attributed and reports
// the count on log at most every 10 seconds.
func (c *callsInFlight) noteDrop(log io.Writer) {
	c.mu.Lock()
	c.dropped++
	c.total++
	now := time.Now()
	if now.Sub(c.lastNote) < 10*time.Second {
		c.mu.Unlock()
		return
	}
	n := c.dropped
	c.dropped, c.lastNote = 0, now
	c.mu.Unlock()
	fmt.Fprintf(log, "planlock proxy: dropped %d upstream log message(s): over HTTP a log message goes to a client only while its session alone has calls in flight and no other bearer identity has made calls\n", n)
}

// routeLog relays an upstream notifications/message. The upstream is one
// connection shared by every client and a log message names no request, so
// over stdio (one client) it goes to the client, and over HTTP only to the
// session whose calls are the only ones in flight, and only while a single
// bearer identity has ever made calls (a message may trail its call, so
// within that identity it can reach another of its sessions, never another
// identity). Otherwise it is dropped (and counted in the log) rather than
// shown to a client it may not belong to.
//
// A client of protocol 2026-07-28 gets one only for a request that asked
// for it with a log level at or below the message's (loglevel.go): over
// stdio while such a call is in flight, over HTTP when the one call it can
// belong to is one.
func (p *Proxy) routeLog(method string, params map[string]any) {
	level, _ := params["level"].(string)
	if p.stdioProg != nil {
		if !p.stdioModern.Load() || p.stdioAsks.wants(mcp.LoggingLevel(level)) {
			p.srv.SendNotificationToAllClients(method, params)
		}
		return
	}
	ctx, ok := p.inflight.soleSession()
	if !ok {
		p.inflight.noteDrop(p.cfg.Log)
		return
	}
	if server.IsModernRequest(ctx) {
		if asked := modernAsk(ctx); asked == "" || !mcp.LoggingLevel(level).ShouldSendTo(asked) {
			return
		}
	}
	// A call on the HTTP fast lane writes it on its own response, where the
	// server's forwarder would (httpfast.go).
	if hc, ok := responderOf(ctx).(callNotifier); ok {
		if s := server.ClientSessionFromContext(ctx); s != nil && s.Initialized() && hc.notify(method, params) {
			return
		}
	}
	_ = p.srv.SendNotificationToClient(ctx, method, params)
}
