package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/planlock/planlock/internal/oneline"
	"github.com/planlock/planlock/internal/wire"
)

// maxStdioRequests bounds the stdio client's requests handled at once; the
// next one is read when one ends.
const maxStdioRequests = 1024

// serveLines serves the stdio client's messages (one per line, bounded by
// lines) with the MCP server, writing answers and notifications to out.
//
// It does what mcp-go's StdioServer does for planlock, with less work per
// message: one decode to tell requests from notifications (instead of
// five), the request handed to an idle worker at once (instead of through
// a read goroutine per line and a queue). The MCP server
// behind it, and so every answer, is the same.
func (p *Proxy) serveLines(ctx context.Context, lines *lineLimiter, out io.Writer) error {
	w := &messageWriter{out: out, log: p.cfg.Log}
	sess := &stdioSession{notifications: make(chan mcp.JSONRPCNotification, 100), w: w, pending: map[int64]chan clientResponse{}}
	if err := p.srv.RegisterSession(ctx, sess); err != nil {
		return fmt.Errorf("register session: %w", err)
	}
	defer p.srv.UnregisterSession(ctx, sess.SessionID())
	ctx = p.srv.WithContext(ctx, sess)
	// Requests run on their own goroutines; when the input ends (or ctx)
	// they are cancelled and waited for, so none outlives the session.
	ctx, cancel := context.WithCancel(ctx)
	r := &lineReader{p: p, lines: lines, w: w, sess: sess,
		slots: make(chan struct{}, maxStdioRequests), work: make(chan func())}
	defer sess.end()
	r.fast = p.fastLaneFor(ctx, r.w, func(job func()) bool { return r.run(ctx, job) })
	r.spawn(func() {
		for {
			select {
			case n := <-sess.notifications:
				r.w.write(n)
			case <-ctx.Done():
				return
			}
		}
	})
	// The loop reads in a goroutine of its own only so that an ended ctx
	// does not wait for the client's next line.
	done := make(chan error, 1)
	go func() { done <- r.loop(ctx) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	cancel()
	if r.fast != nil {
		r.fast.close()
	}
	r.close()
	return err
}

// lineReader reads the client's messages and hands each request to a
// goroutine of its own.
type lineReader struct {
	p     *Proxy
	lines *lineLimiter
	w     *messageWriter
	slots chan struct{} // one per request in progress
	work  chan func()   // hands a request to an idle worker
	fast  *fastLane     // nil when the proxy cannot take it (fastlane.go)
	sess  *stdioSession

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// spawn runs f on a goroutine that close waits for; after close it does not.
func (r *lineReader) spawn(f func()) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.wg.Go(f)
	return true
}

func (r *lineReader) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *lineReader) loop(ctx context.Context) error {
	for {
		line, err := r.lines.nextLine()
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		if r.fast != nil && r.fastLine(line) {
			continue
		}
		var head struct {
			ID     json.RawMessage `json:"id"`
			Method *string         `json:"method"`
			clientResponse
		}
		var syntax *json.SyntaxError
		err = json.Unmarshal(line, &head)
		if errors.As(err, &syntax) {
			// Not JSON: answered as mcp-go's stdio server does.
			r.w.write(mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(nil),
				Error: mcp.NewJSONRPCErrorDetails(mcp.PARSE_ERROR, "Parse error", nil)})
			continue
		}

		if err == nil && head.Method == nil && head.ID != nil && (head.Result != nil || head.Error != nil) {
			// The client's response to one of planlock's requests; one to
			// no request is dropped, as mcp-go's stdio server drops it.
			r.sess.deliver(head.ID, head.clientResponse)
			continue
		}
		msg := json.RawMessage(append([]byte(nil), line...)) // line is the reader's buffer
		if head.ID == nil || string(head.ID) == "null" {
			// A notification, or JSON that is not an object (the server
			// answers that), handled in order before the next message: a
			// cancellation must not wait behind requests.
			if resp := r.p.handleMessage(ctx, nil, msg); resp != nil {
				r.w.write(resp)
			}
			continue
		}
		id := head.ID
		if !r.run(ctx, func() {
			if resp := r.p.handleMessage(ctx, id, msg); resp != nil {
				r.w.write(resp)
			}
		}) {
			return ctx.Err()
		}
	}
}

// fastLine hands a tools/call, or a cancellation of one, to the fast lane
// (fastlane.go); false when the lane did not take the line. The envelope is
// read with scanEnvelope: a line it does not read as plain goes the usual way.
func (r *lineReader) fastLine(line []byte) bool {
	env, ok := wire.ScanEnvelope(line)
	if !ok {
		return false
	}
	if v, _ := wire.PlainString(env.JSONRPC); v != mcp.JSONRPC_VERSION {
		return false
	}
	switch method, _ := wire.PlainString(env.Method); method {
	case string(mcp.MethodToolsCall):
		return env.ID != nil && r.fast.call(env.ID, env.Params)
	case string(mcp.MethodNotificationCancelled):
		return env.ID == nil && r.fast.cancel(env.Params)
	}
	return false
}

// run runs job on a worker once a request slot is free; false when ctx
// ended first or the session is closing (job does not run).
func (r *lineReader) run(ctx context.Context, job func()) bool {
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	j := func() {
		defer func() { <-r.slots }()
		job()
	}
	select {
	case r.work <- j: // an idle worker took it
		return true
	default:
		if r.spawn(func() { r.worker(ctx, j) }) {
			return true
		}
		<-r.slots
		return false
	}
}

// worker runs job, then each request handed to it while idle, until ctx
// ends. Workers live on, as many as requests were ever in progress at once,
// because a request's deep call chain grows a goroutine's stack: a new
// goroutine per request would grow (copy) it again each time.
func (r *lineReader) worker(ctx context.Context, job func()) {
	for {
		job()
		select {
		case job = <-r.work:
		case <-ctx.Done():
			return
		}
	}
}

// handleMessage runs the MCP server on one message; a panic becomes an
// internal error answer to a request, and nothing for a notification.
func (p *Proxy) handleMessage(ctx context.Context, id json.RawMessage, msg json.RawMessage) (resp any) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(p.cfg.Log, "planlock proxy: panic handling a client message: %v\n", r)
			resp = nil
			if id != nil {
				resp = map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": id,
					"error": map[string]any{"code": mcp.INTERNAL_ERROR, "message": fmt.Sprintf("internal panic: %v", r)}}
			}
		}
	}()
	if r := p.srv.HandleMessage(ctx, msg); r != nil {
		return r
	}
	return nil
}

// messageWriter writes whole messages, one line each, to the client.
type messageWriter struct {
	out io.Writer // serialises writes (syncWriter underneath)
	log io.Writer
}

func (w *messageWriter) write(m any) {
	b, err := json.Marshal(m)
	if err != nil {
		fmt.Fprintf(w.log, "planlock proxy: encode a message to the client: %v\n", err)
		return
	}
	if _, err := w.out.Write(append(b, '\n')); err != nil {
		fmt.Fprintf(w.log, "planlock proxy: write to the client: %v\n", err)
	}
}

// writeResult answers request id (as the client wrote it) with res, as the
// server answers a request of its era (modern: of protocol 2026-07-28).
func (w *messageWriter) writeResult(p *Proxy, id json.RawMessage, res *mcp.CallToolResult, modern bool) {
	b := make([]byte, 0, 256)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b, err := p.appendEraResult(b, res, modern)
	if err != nil {
		fmt.Fprintf(w.log, "planlock proxy: encode a message to the client: %v\n", err)
		return
	}
	b = append(b, "}\n"...)
	if _, err := w.out.Write(b); err != nil {
		fmt.Fprintf(w.log, "planlock proxy: write to the client: %v\n", err)
	}
}

// writeError answers request id with a tool handler's error, as the
// server answers one (an internal error carrying its message).
func (w *messageWriter) writeError(id json.RawMessage, err error) {
	w.write(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": id,
		"error": mcp.NewJSONRPCErrorDetails(mcp.INTERNAL_ERROR, err.Error(), nil)})
}

// stdioSession is the one stdio client's session with the MCP server.
type stdioSession struct {
	notifications chan mcp.JSONRPCNotification
	initialized   atomic.Bool
	level         atomic.Value // mcp.LoggingLevel

	mu   sync.Mutex
	info mcp.Implementation
	caps mcp.ClientCapabilities

	// The requests planlock sends a legacy client (elicitation, sampling,
	// roots: what the plan let through, multiround.go), by id, until the
	// client's response arrives (deliver) or the session ends (end).
	w       *messageWriter // the session's, set at its start
	nextID  atomic.Int64
	pending map[int64]chan clientResponse // under mu; nil once ended
}

// clientResponse is the client's response to one of planlock's requests.
type clientResponse struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

var (
	_ server.SessionWithLogging     = (*stdioSession)(nil)
	_ server.SessionWithClientInfo  = (*stdioSession)(nil)
	_ server.SessionWithElicitation = (*stdioSession)(nil)
	_ server.SessionWithSampling    = (*stdioSession)(nil)
	_ server.SessionWithRoots       = (*stdioSession)(nil)
)

// request sends the client a request of method and decodes its result
// into out, waiting for the client's response until ctx ends.
func (s *stdioSession) request(ctx context.Context, method string, params, out any) error {
	id := s.nextID.Add(1)
	ch := make(chan clientResponse, 1)
	s.mu.Lock()
	if s.pending == nil {
		s.mu.Unlock()
		return fmt.Errorf("%s: the client's session has ended", method)
	}
	s.pending[id] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.pending != nil {
			delete(s.pending, id)
		}
		s.mu.Unlock()
	}()
	s.w.write(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": id, "method": method, "params": params})
	select {
	case r, ok := <-ch:
		switch {
		case !ok:
			return fmt.Errorf("%s: the client's session ended before it answered", method)
		case r.Error != nil:
			return fmt.Errorf("%s: the client answered error %d: %s", method, r.Error.Code, oneline.Of(r.Error.Message, 200))
		}
		if err := json.Unmarshal(r.Result, out); err != nil {
			return fmt.Errorf("%s: the client's result: %w", method, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// deliver hands the client's response with id to the request waiting for
// it; false when none waits (an id planlock never sent, or one answered).
func (s *stdioSession) deliver(id json.RawMessage, r clientResponse) bool {
	var n int64
	if json.Unmarshal(id, &n) != nil {
		return false
	}
	s.mu.Lock()
	ch, ok := s.pending[n]
	if ok {
		delete(s.pending, n)
	}
	s.mu.Unlock()
	if ok {
		ch <- r
	}
	return ok
}

// end fails every request still waiting: the client is gone.
func (s *stdioSession) end() {
	s.mu.Lock()
	pending := s.pending
	s.pending = nil
	s.mu.Unlock()
	for _, ch := range pending {
		close(ch)
	}
}

func (s *stdioSession) RequestElicitation(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	var res mcp.ElicitationResult
	if err := s.request(ctx, string(mcp.MethodElicitationCreate), req.Params, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

func (s *stdioSession) RequestSampling(ctx context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	var res mcp.CreateMessageResult
	if err := s.request(ctx, string(mcp.MethodSamplingCreateMessage), req.CreateMessageParams, &res); err != nil {
		return nil, err
	}
	// Typed content, as mcp-go's own sessions give it (its checks and
	// encoding expect TextContent and its kin, not a map).
	content, err := mcp.ParseSamplingContent(res.Content)
	if err != nil {
		return nil, fmt.Errorf("%s: the client's result: %w", mcp.MethodSamplingCreateMessage, err)
	}
	res.Content = content
	return &res, nil
}

func (s *stdioSession) ListRoots(ctx context.Context, _ mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	var res mcp.ListRootsResult
	if err := s.request(ctx, string(mcp.MethodListRoots), map[string]any{}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

func (s *stdioSession) SessionID() string { return "stdio" }

func (s *stdioSession) NotificationChannel() chan<- mcp.JSONRPCNotification {
	return s.notifications
}

func (s *stdioSession) Initialize() {
	s.level.Store(mcp.LoggingLevelError)
	s.initialized.Store(true)
}

func (s *stdioSession) Initialized() bool { return s.initialized.Load() }

func (s *stdioSession) SetLogLevel(level mcp.LoggingLevel) { s.level.Store(level) }

func (s *stdioSession) GetLogLevel() mcp.LoggingLevel {
	if l, ok := s.level.Load().(mcp.LoggingLevel); ok {
		return l
	}
	return mcp.LoggingLevelError
}

func (s *stdioSession) GetClientInfo() mcp.Implementation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info
}

func (s *stdioSession) SetClientInfo(info mcp.Implementation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.info = info
}

func (s *stdioSession) GetClientCapabilities() mcp.ClientCapabilities {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.caps
}

func (s *stdioSession) SetClientCapabilities(caps mcp.ClientCapabilities) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.caps = caps
}
