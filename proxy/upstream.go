package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/internal/oneline"
	"github.com/planlock/planlock/internal/wire"
)

// UpstreamConfig says how to reach the MCP server behind the proxy: a
// command run over stdio, or a streamable HTTP URL.
type UpstreamConfig struct {
	Command []string // program and arguments (stdio)
	Env     []string // the complete environment of the program, "NAME=value"
	URL     string   // streamable HTTP endpoint
	Stderr  io.Writer
	// MaxMessageBytes bounds one message from the upstream (a stdio line,
	// an HTTP body, an SSE event); zero means DefaultMaxMessageBytes.
	MaxMessageBytes int
	// InitTimeout bounds initialize and tools/list; zero means 30s.
	InitTimeout time.Duration
	// ClientName and ClientVersion are sent in initialize.
	ClientName, ClientVersion string
	// PreferModern, when set and true at a connection's start, makes a
	// dual-era upstream be spoken to in 2026-07-28 rather than its legacy
	// era: the proxy sets it while the plan has input rules, which only
	// that era's multi-round results carry (upera.go).
	PreferModern func() bool
}

// Upstream is a supervised connection to the upstream server. A stdio
// upstream that dies is restarted with backoff and initialised again; calls
// made while it is down fail at once with the reason. A call in flight is
// never replayed on the new connection: the caller decides what a lost call
// means.
type Upstream struct {
	cfg    UpstreamConfig
	nextID atomic.Int64
	// probeID numbers the server/discover probes -1, -2, …: apart from
	// the requests' ids, which keep counting from 1 as they did before
	// planlock probed.
	probeID atomic.Int64
	// metaCache is the _meta of modern requests (upera.go).
	metaCache atomic.Pointer[cachedMeta]

	// onNotify receives the upstream's notifications; onReady the raw
	// tools/list entries after each (re)initialisation.
	onNotify func(mcp.JSONRPCNotification)
	onReady  func(tools []json.RawMessage)
	// onConnect, when set, runs after tools/list on each new connection,
	// before onReady, with that connection's request function and the
	// upstream's announced capabilities (resources.go).
	onConnect func(ctx context.Context, send sendFunc, caps upstreamCaps)
	// onAsk answers a legacy upstream's server-to-client request (nil:
	// every one is refused); legacyCaps are the client capabilities
	// declared at initialize (nil: none).
	onAsk      func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	legacyCaps func() map[string]any
	// busy counts the requests in flight to the upstream, planlock's own
	// included: a server-to-client request that names no call belongs to
	// one only while it is the only one (onlyRequest).
	busy atomic.Int64
	// listenFilter, when set, is what planlock listens for on a modern
	// upstream's subscriptions/listen stream (uplisten.go).
	listenFilter func() mcp.SubscriptionFilter
	listen       upListen

	mu      sync.Mutex
	conn    *upConn
	lastErr error
	changed chan struct{} // closed and replaced whenever conn changes

	firstOnce sync.Once
	first     chan struct{} // closed after the first connection attempt
}

type upConn struct {
	tr   transport.Interface
	dead chan struct{}
	once sync.Once
	why  error
	// version is the modern protocol version every request on this
	// connection declares (upera.go); "" on a legacy connection, which
	// was initialised instead. Set before the connection is shared.
	version string
	// headerTools are the tools of a modern HTTP upstream whose
	// arguments are mirrored in Mcp-Param-* headers, by name (upera.go).
	headerTools atomic.Pointer[map[string]*mcp.Tool]
}

func (c *upConn) kill(why error) {
	c.once.Do(func() {
		c.why = why
		close(c.dead)
	})
}

// ErrUnavailable is returned when no upstream connection is up.
var ErrUnavailable = errors.New("upstream unavailable")

// RPCError is a JSON-RPC error answered by the upstream.
type RPCError struct {
	Code    int
	Message string
	Data    json.RawMessage // the error's data, when any
}

func (e *RPCError) Error() string { return fmt.Sprintf("upstream error %d: %s", e.Code, e.Message) }

// newUpstream prepares a connection; Run starts and supervises it.
func newUpstream(cfg UpstreamConfig, onNotify func(mcp.JSONRPCNotification), onReady func([]json.RawMessage)) *Upstream {
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	if cfg.InitTimeout <= 0 {
		cfg.InitTimeout = 30 * time.Second
	}
	return &Upstream{cfg: cfg, onNotify: onNotify, onReady: onReady, changed: make(chan struct{}),
		lastErr: errors.New("not started yet"), first: make(chan struct{})}
}

// Run connects and keeps the upstream connected until ctx ends, restarting
// it with exponential backoff (100ms doubling up to 10s) after each loss.
func (u *Upstream) Run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		c, err := u.connect(ctx)
		if errors.Is(err, ErrStartRefused) {
			// No protocol version in common: a restart would be refused
			// the same way, so none is tried.
			u.setConn(nil, err)
			return
		}
		if err != nil {
			u.setConn(nil, err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 10*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		u.setConn(c, nil)
		var why error
		select {
		case <-ctx.Done():
			why = ctx.Err()
		case <-c.dead:
			why = c.why // written before dead was closed
		}
		u.setConn(nil, fmt.Errorf("restarting after: %w", why))
		c.kill(why) // ends what waits on the connection (its listen stream)
		_ = c.tr.Close()
	}
}

func (u *Upstream) setConn(c *upConn, err error) {
	defer u.firstOnce.Do(func() { close(u.first) })
	u.mu.Lock()
	u.conn = c
	if err != nil {
		u.lastErr = err
	}
	close(u.changed)
	u.changed = make(chan struct{})
	u.mu.Unlock()
}

func (u *Upstream) maxMessageBytes() int {
	if u.cfg.MaxMessageBytes > 0 {
		return u.cfg.MaxMessageBytes
	}
	return DefaultMaxMessageBytes
}

// logger sends the transport's warnings and errors to the upstream's stderr
// destination; its chatter stays out.
func (u *Upstream) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(u.cfg.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// FirstAttempt is closed once the first connection attempt succeeded or failed.
func (u *Upstream) FirstAttempt() <-chan struct{} { return u.first }

// WaitReady blocks until a connection is up or ctx ends.
func (u *Upstream) WaitReady(ctx context.Context) error {
	for {
		u.mu.Lock()
		c, ch, last := u.conn, u.changed, u.lastErr
		u.mu.Unlock()
		if c != nil {
			select {
			case <-c.dead: // lost; wait for the next connection
			default:
				return nil
			}
		}
		if errors.Is(last, ErrStartRefused) {
			return fmt.Errorf("%w: %w", ErrUnavailable, last) // never retried
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", ErrUnavailable, last)
		case <-ch:
		}
	}
}

func (u *Upstream) connect(ctx context.Context) (*upConn, error) {
	// The probe goes out on a transport without the legacy GET stream: a
	// modern upstream has none (405), and the era is not known yet.
	c, err := u.open(ctx, false)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*upConn, error) {
		// A command that exited says why on its stderr: that is the
		// cause, not the request it left unanswered.
		if st, ok := c.tr.(*stdioTransport); ok {
			if ee := st.exitError(true); ee != nil {
				err = ee
			}
		}
		_ = c.tr.Close()
		return nil, err
	}
	ictx, cancel := context.WithTimeout(ctx, u.cfg.InitTimeout)
	defer cancel()
	n, err := u.probe(ictx, c)
	if st, ok := c.tr.(*stdioTransport); ok && err != nil && ctx.Err() == nil && st.exitError(false) != nil {
		// A legacy server built on an SDK that ends on any request
		// before initialize died on the probe: it is a legacy server.
		// Started again, it is spoken to with initialize at once.
		_ = c.tr.Close()
		if c, err = u.open(ctx, false); err != nil {
			return nil, err
		}
		n = negotiated{legacy: mcp.LATEST_LEGACY_PROTOCOL_VERSION}
	}
	if err != nil {
		return fail(err)
	}
	var caps upstreamCaps
	if n.version != "" {
		c.version = n.version
		if h, ok := c.tr.(transport.HTTPConnection); ok {
			h.SetProtocolVersion(n.version)
		}
		// resources/subscribe is gone in 2026-07-28: a subscription is
		// part of planlock's own subscriptions/listen stream (uplisten.go).
		caps = parseCaps(n.caps)
		caps.Modern = true
	} else {
		if u.cfg.URL != "" {
			// A legacy HTTP upstream sends its notifications (such as
			// tools/list_changed, which the proxy relays and re-checks the
			// plan against) on the standalone GET stream: a transport that
			// keeps one open replaces the probe's.
			_ = c.tr.Close()
			if c, err = u.open(ctx, true); err != nil {
				return nil, err
			}
		}
		if caps, err = u.initialize(ictx, c, n.legacy); err != nil {
			return fail(err)
		}
	}
	tools, err := u.listTools(ictx, c)
	if err != nil {
		return fail(err)
	}
	if u.onConnect != nil {
		u.onConnect(ictx, func(ctx context.Context, method string, params any) (json.RawMessage, error) {
			return u.send(ctx, c, method, params)
		}, caps)
	}
	if u.onReady != nil {
		u.onReady(tools)
	}
	if c.version != "" && u.listenFilter != nil {
		// What clients subscribed to before a restart, and the list
		// changes, are listened for on the new connection at once.
		go func() {
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), u.cfg.InitTimeout)
			defer cancel()
			if _, err := u.relisten(lctx, c); err != nil {
				u.logger().Warn("planlock: upstream " + u.name() + ": " + err.Error())
			}
		}()
	}
	return c, nil
}

// open starts a transport to the upstream: the program (stdio) or the URL
// (HTTP, with the legacy standalone GET stream when listen is set).
func (u *Upstream) open(ctx context.Context, listen bool) (*upConn, error) {
	var tr transport.Interface
	var started *exec.Cmd
	if u.cfg.URL != "" {
		client := &http.Client{Transport: limitBodies(http.DefaultTransport, u.maxMessageBytes())}
		opts := []transport.StreamableHTTPCOption{transport.WithHTTPLogger(u.logger()), transport.WithHTTPBasicClient(client)}
		if listen {
			// mcp-go deprecates the option because 2026-07-28 replaced
			// the stream with subscriptions/listen; it is only used for
			// legacy upstreams, which have no other.
			//lint:ignore SA1019 needed for notifications from pre-2026-07-28 upstreams (see above)
			opts = append(opts, transport.WithContinuousListening())
		}
		h, err := transport.NewStreamableHTTP(u.cfg.URL, opts...)
		if err != nil {
			return nil, fmt.Errorf("upstream %s: %w", u.cfg.URL, err)
		}
		tr = h
	} else {
		// Not CommandContext: Close ends the process gracefully; a clean
		// environment, never ours.
		cmd := exec.Command(u.cfg.Command[0], u.cfg.Command[1:]...)
		cmd.Env = u.cfg.Env
		started = cmd
		st := newStdioTransport(cmd, u.cfg.Stderr, u.logger())
		st.max = u.maxMessageBytes()
		tr = st
	}
	c := &upConn{tr: tr, dead: make(chan struct{})}
	if st, ok := tr.(*stdioTransport); ok {
		// Its stdout ended: no answer can come any more, so no call may
		// be counted on this connection from now on.
		st.onEOF = func() {
			if ee := st.exitError(false); ee != nil {
				c.kill(ee)
				return
			}
			c.kill(errors.New("the upstream closed its stdout"))
		}
	}
	tr.SetNotificationHandler(func(n mcp.JSONRPCNotification) {
		if u.listenAcked(n) {
			return
		}
		if u.onNotify != nil {
			u.onNotify(n)
		}
	})
	if b, ok := tr.(transport.BidirectionalInterface); ok {
		// A legacy upstream's sampling, elicitation or roots request is
		// answered by the gate (onAsk); a refusal comes at once instead
		// of after a timeout.
		b.SetRequestHandler(func(ctx context.Context, r transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
			if u.onAsk == nil {
				return transport.NewJSONRPCErrorResponse(r.ID, mcp.METHOD_NOT_FOUND,
					fmt.Sprintf("planlock proxy does not relay %s to the client", r.Method), nil), nil
			}
			params, err := json.Marshal(r.Params)
			if err != nil {
				return transport.NewJSONRPCErrorResponse(r.ID, mcp.INVALID_PARAMS, "params: "+err.Error(), nil), nil
			}
			res, err := u.onAsk(ctx, r.Method, params)
			if err != nil {
				return transport.NewJSONRPCErrorResponse(r.ID, mcp.INVALID_REQUEST, err.Error(), nil), nil
			}
			return transport.NewJSONRPCResultResponse(r.ID, res), nil
		})
	}
	if err := tr.Start(ctx); err != nil {
		return nil, fmt.Errorf("start upstream: %w", err)
	}
	if started != nil && started.Process != nil {
		// Notice a dead process at once, not at the next call: that call
		// would be counted and then fail.
		pid := started.Process.Pid
		go func() {
			if err := waitExit(pid); err == nil {
				if st, ok := tr.(*stdioTransport); ok {
					if ee := st.exitError(false); ee != nil {
						c.kill(ee)
						return
					}
				}
				c.kill(fmt.Errorf("upstream process %d exited", pid))
			}
		}()
	}
	return c, nil
}

// initialize runs the legacy handshake asking for version. A -32022 whose
// data names a legacy version planlock speaks is retried once with it; one
// that names none is a refusal.
func (u *Upstream) initialize(ctx context.Context, c *upConn, version string) (upstreamCaps, error) {
	var res json.RawMessage
	var err error
	for attempt := 0; ; attempt++ {
		res, err = u.send(ctx, c, "initialize", map[string]any{
			"protocolVersion": version,
			"capabilities":    u.initCapabilities(),
			"clientInfo":      map[string]any{"name": u.cfg.ClientName, "version": u.cfg.ClientVersion},
		})
		supported, refused := unsupportedVersions(err)
		if !refused {
			break
		}
		if v := mutual(supported, false); v != "" && v != version && attempt == 0 {
			version = v
			continue
		}
		return upstreamCaps{}, u.refusal("it refused initialize with protocol version %s and supports %s", version, quoteList(supported))
	}
	if err != nil {
		return upstreamCaps{}, fmt.Errorf("initialize upstream: %w", err)
	}
	var init struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
	}
	if err := json.Unmarshal(res, &init); err != nil {
		return upstreamCaps{}, fmt.Errorf("initialize upstream: bad result: %w", err)
	}
	if !slices.Contains(ourVersions, init.ProtocolVersion) || mcp.IsModernProtocol(init.ProtocolVersion) {
		return upstreamCaps{}, u.refusal("initialize answered protocol version %q", oneline.Of(init.ProtocolVersion, 40))
	}
	if h, ok := c.tr.(transport.HTTPConnection); ok {
		h.SetProtocolVersion(init.ProtocolVersion)
	}
	if err := c.tr.SendNotification(ctx, mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: string(mcp.MethodNotificationInitialized)}}); err != nil {
		return upstreamCaps{}, fmt.Errorf("initialize upstream: %w", err)
	}
	return parseCaps(init.Capabilities), nil
}

// listTools reads tools/list raw, following nextCursor, so that no schema
// keyword is lost to a typed decoder.
func (u *Upstream) listTools(ctx context.Context, c *upConn) ([]json.RawMessage, error) {
	var all []json.RawMessage
	params := map[string]any{}
	for page := 0; ; page++ {
		if page > 1000 {
			return nil, errors.New("tools/list: more than 1000 pages")
		}
		res, err := u.send(ctx, c, "tools/list", params)
		if err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		var r struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &r); err != nil {
			return nil, fmt.Errorf("tools/list: bad result: %w", err)
		}
		all = append(all, r.Tools...)
		if r.NextCursor == "" {
			u.rememberHeaderTools(c, all)
			return all, nil
		}
		params = map[string]any{"cursor": r.NextCursor}
	}
}

// Request sends one request to the current connection and returns the raw
// result. When ctx ends first the upstream is told the request is cancelled.
func (u *Upstream) Request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	u.mu.Lock()
	c, last := u.conn, u.lastErr
	u.mu.Unlock()
	if c == nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, last)
	}
	res, err := u.send(ctx, c, method, params)
	if errors.Is(err, transport.ErrSessionTerminated) {
		// An HTTP upstream that restarted answers 404 to the old session:
		// the request was not processed, so it is sent once more on a
		// fresh session (at most once still holds).
		if werr := u.WaitReady(ctx); werr != nil {
			return nil, err
		}
		u.mu.Lock()
		c = u.conn
		u.mu.Unlock()
		if c == nil {
			return nil, err
		}
		return u.send(ctx, c, method, params)
	}
	return res, err
}

func (u *Upstream) send(ctx context.Context, c *upConn, method string, params any) (json.RawMessage, error) {
	return u.sendID(ctx, c, u.nextID.Add(1), method, params)
}

// sendID is send with the request id given.
func (u *Upstream) sendID(ctx context.Context, c *upConn, id int64, method string, params any) (json.RawMessage, error) {
	u.busy.Add(1)
	defer u.busy.Add(-1)
	req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id), Method: method, Params: params}
	if c.version != "" {
		if err := u.modernRequest(c, &req, inputCapabilities(ctx), requestedLogLevel(ctx)); err != nil {
			return nil, err
		}
	}
	resp, err := c.tr.SendRequest(ctx, req)
	if err != nil && c.version != "" && errors.Is(err, transport.ErrSessionTerminated) {
		// A modern server has no sessions: its 404 answers a method it
		// does not implement (mcp-go drops that body).
		return nil, &RPCError{Code: mcp.METHOD_NOT_FOUND, Message: "Method not found: " + method}
	}
	if err != nil {
		if ctx.Err() != nil {
			// Tell the upstream to stop working on it; best effort.
			nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = c.tr.SendNotification(nctx, cancelledNotification(id, ctx.Err().Error()))
			cancel()
			return nil, ctx.Err()
		}
		if errors.Is(err, transport.ErrSessionTerminated) {
			c.kill(err)
			return nil, err
		}
		if errors.Is(err, transport.ErrTransportClosed) {
			c.kill(err)
			return nil, fmt.Errorf("upstream connection lost: %w", err)
		}
		return nil, err
	}
	if resp.Error != nil {
		e := &RPCError{Code: resp.Error.Code, Message: resp.Error.Message}
		if resp.Error.Data != nil {
			if raw, ok := resp.Error.Data.(json.RawMessage); ok {
				e.Data = raw
			} else if b, err := json.Marshal(resp.Error.Data); err == nil {
				e.Data = b
			}
		}
		return nil, e
	}
	if len(resp.Result) == 0 {
		return nil, errors.New("upstream answered with neither result nor error")
	}
	return resp.Result, nil
}

// cancelledNotification tells the upstream that planlock no longer waits
// for request id.
func cancelledNotification(id int64, reason string) mcp.JSONRPCNotification {
	return mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: string(mcp.MethodNotificationCancelled),
			Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": id, "reason": reason}}}}
}

// ErrNoAsync is returned by Go when the upstream's transport can only send
// a request and wait for its answer (HTTP).
var ErrNoAsync = errors.New("upstream transport cannot send without waiting")

// Go sends one request on the current connection without waiting. done is
// called exactly once, on the goroutine that read the answer, with what
// Request would return for the same outcome: the raw result, an *RPCError,
// or the loss of the connection (which is then restarted). params is valid
// JSON or empty; it is sent as is.
//
// When Go returns an error done never runs: ErrUnavailable when no
// connection is up, ErrNoAsync over HTTP, a lost connection when the
// request could not be written.
//
// stop abandons the request (a timeout, a client's cancellation): when it
// was still pending, done will not run, the upstream is told it is
// cancelled and stop returns true; when done ran or is running, false.
func (u *Upstream) Go(method string, params json.RawMessage, done func(json.RawMessage, error)) (stop func(reason string) bool, err error) {
	return u.goAsking("", method, params, done)
}

// goAsking is Go for a request whose client asked for log messages at
// level ("" for none): a modern upstream is told so (loglevel.go).
func (u *Upstream) goAsking(level mcp.LoggingLevel, method string, params json.RawMessage, done func(json.RawMessage, error)) (stop func(reason string) bool, err error) {
	u.mu.Lock()
	c, last := u.conn, u.lastErr
	u.mu.Unlock()
	if c == nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, last)
	}
	tr, ok := c.tr.(*stdioTransport)
	if !ok {
		return nil, ErrNoAsync
	}
	if c.version != "" {
		if params, err = u.modernParams(params, c.version, nil, level); err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
	}
	id := u.nextID.Add(1)
	line, err := wire.RequestLine(id, method, params)
	if err != nil {
		return nil, err
	}
	u.busy.Add(1)
	err = tr.SendAsync(id, line, func(res json.RawMessage, rpcErr *RPCError, err error) {
		u.busy.Add(-1)
		var big errUpstreamTooLarge
		switch {
		case errors.As(err, &big):
			done(nil, err) // the connection stays: only this answer was dropped
		case err != nil:
			c.kill(err)
			done(nil, fmt.Errorf("upstream connection lost: %w", err))
		case rpcErr != nil:
			done(nil, rpcErr)
		case len(res) == 0:
			done(nil, errors.New("upstream answered with neither result nor error"))
		default:
			done(res, nil)
		}
	})
	if err != nil {
		u.busy.Add(-1)
		if errors.Is(err, transport.ErrTransportClosed) {
			c.kill(err)
			return nil, fmt.Errorf("upstream connection lost: %w", err)
		}
		return nil, err
	}
	return func(reason string) bool {
		if !tr.Forget(id) {
			return false
		}
		u.busy.Add(-1) // done will not run
		// Tell the upstream to stop working on it; best effort.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = tr.SendNotification(ctx, cancelledNotification(id, reason))
		return true
	}, nil
}

// ListTools reads the current connection's tools/list raw.
func (u *Upstream) ListTools(ctx context.Context) ([]json.RawMessage, error) {
	u.mu.Lock()
	c, last := u.conn, u.lastErr
	u.mu.Unlock()
	if c == nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, last)
	}
	return u.listTools(ctx, c)
}

// Ready reports whether a connection is up, and if not, why.
func (u *Upstream) Ready() (bool, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.conn == nil {
		return false, u.lastErr
	}
	select {
	case <-u.conn.dead:
		return false, u.conn.why
	default:
	}
	if tr, ok := u.conn.tr.(*stdioTransport); ok && tr.cmd.Process != nil && exitedNow(tr.cmd.Process.Pid) {
		// Dead before its exit was noticed: a call now would be counted
		// and then not sent.
		return false, fmt.Errorf("upstream process %d exited", tr.cmd.Process.Pid)
	}
	return true, nil
}

// FetchTools connects once to an upstream, reads its tools/list raw and
// closes the connection.
func FetchTools(ctx context.Context, cfg UpstreamConfig) ([]json.RawMessage, error) {
	var tools []json.RawMessage
	u := newUpstream(cfg, nil, func(t []json.RawMessage) { tools = t })
	c, err := u.connect(ctx)
	if err != nil {
		return nil, err
	}
	_ = c.tr.Close()
	return tools, nil
}

// initCapabilities are the client capabilities of a legacy initialize.
func (u *Upstream) initCapabilities() map[string]any {
	if u.legacyCaps == nil {
		return map[string]any{}
	}
	return u.legacyCaps()
}

// onlyRequest reports whether exactly one request is in flight to the
// upstream.
func (u *Upstream) onlyRequest() bool { return u.busy.Load() == 1 }
