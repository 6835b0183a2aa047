package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/internal/oneline"
	"github.com/planlock/planlock/internal/wire"
)

// stdioTransport runs the upstream command and speaks JSON-RPC lines with
// it. Unlike mcp-go's Stdio it can send a request without waiting
// (SendAsync) and answer it by a callback on the goroutine that read the
// answer: on a 2-core machine every goroutine hand-off costs about as much
// as the rest of the relay, and this path has none.
//
// Request ids are integers (the Upstream numbers its requests).
type stdioTransport struct {
	cmd    *exec.Cmd
	stderr io.Writer // where the command's stderr is copied
	logger *slog.Logger

	stdin io.WriteCloser
	w     io.Writer  // stdin, raw when it can be
	wmu   sync.Mutex // one line per Write, lines never interleaved
	// written counts the bytes written to stdin, so that what the upstream
	// never read when it died is known (unreadFrom).
	written atomic.Int64

	stdout io.ReadCloser
	errOut io.ReadCloser
	// lastErr keeps the command's last stderr line; drained is closed
	// once its stderr ended. Both say why an upstream exited (exitError).
	lastErr tailLine
	drained chan struct{}
	// max bounds one line from the upstream (zero: DefaultMaxMessageBytes).
	max int
	// onEOF, when set before Start, runs once the upstream's stdout ends.
	onEOF func()

	mu      sync.Mutex
	pending map[int64]*pendingCall
	closed  bool // no more requests; pending ones have failed
	stopped atomic.Bool

	onNotify  func(mcp.JSONRPCNotification) // set before Start
	onRequest transport.RequestHandler      // set before Start
	ctx       context.Context               // Start's, for the request handler

	started     bool
	cleanupOnce sync.Once
	closeErr    error
}

// pendingCall is a request waiting for its answer: ch for SendRequest, done
// for SendAsync.
type pendingCall struct {
	ch   chan callAnswer
	done func(result json.RawMessage, rpcErr *RPCError, err error)
	// start is 1 + the offset in stdin of the request's line; 0 before it
	// is written.
	start atomic.Int64
}

// errNotSent fails a request the upstream never read: the write found no
// reader (EPIPE, nothing written), or the upstream died with the whole
// line still unread in its stdin pipe. It is a lost connection
// (transport.ErrTransportClosed) whose request did not run.
type errNotSent struct{ why string }

func (e errNotSent) Error() string { return e.why + ": the request was not sent" }

func (e errNotSent) Unwrap() error { return transport.ErrTransportClosed }

// IsNotSent reports whether err says a request never reached the
// upstream: the write found none to read it (errNotSent), no connection was
// up any more (ErrUnavailable), or an HTTP upstream refused the connection.
func IsNotSent(err error) bool {
	var ns errNotSent
	return errors.As(err, &ns) || errors.Is(err, ErrUnavailable) || errors.Is(err, syscall.ECONNREFUSED)
}

type callAnswer struct {
	resp *transport.JSONRPCResponse
	err  error
}

// The shutdown timeouts of mcp-go's Stdio.Close.
const (
	stdioGracefulTimeout = 2 * time.Second
	stdioForceTimeout    = 3 * time.Second
)

// newStdioTransport prepares cmd (not started) whose stderr is copied to
// stderr and whose transport warnings go to logger.
func newStdioTransport(cmd *exec.Cmd, stderr io.Writer, logger *slog.Logger) *stdioTransport {
	return &stdioTransport{cmd: cmd, stderr: stderr, logger: logger, pending: map[int64]*pendingCall{}, drained: make(chan struct{})}
}

var (
	_ transport.Interface              = (*stdioTransport)(nil)
	_ transport.BidirectionalInterface = (*stdioTransport)(nil)
)

// Start starts the command and the goroutine reading its answers.
func (t *stdioTransport) Start(ctx context.Context) error {
	if t.started {
		return nil
	}
	t.started = true
	t.ctx = ctx
	var err error
	if t.stdin, err = t.cmd.StdinPipe(); err != nil {
		return fmt.Errorf("stdin pipe: %w", err)
	}
	if t.stdout, err = t.cmd.StdoutPipe(); err != nil {
		return fmt.Errorf("stdout pipe: %w", err)
	}
	if t.errOut, err = t.cmd.StderrPipe(); err != nil {
		return fmt.Errorf("stderr pipe: %w", err)
	}
	ownGroup(t.cmd)
	if err := t.cmd.Start(); err != nil {
		t.mu.Lock()
		t.closed = true
		t.mu.Unlock()
		return fmt.Errorf("start command: %w", err)
	}
	// The command's pipes are nonblocking (exec makes them with os.Pipe):
	// read and written with raw calls (rawpipe_linux.go).
	t.w = rawIO[io.Writer](t.stdin)
	go func() {
		defer close(t.drained)
		drainStderr(t.errOut, t.stderr, t.logger, &t.lastErr)
	}()
	go t.readLoop(bufio.NewReaderSize(rawIO[io.Reader](t.stdout), 64<<10))
	return nil
}

// drainStderr keeps the command's stderr pipe empty, as mcp-go does: a full
// pipe blocks the command inside write(2) and with it every answer. The copy
// to dest goes through a small queue that drops chunks when dest is slow, so
// a blocked destination cannot stop the drain.
func drainStderr(src io.Reader, dest io.Writer, logger *slog.Logger, last *tailLine) {
	mirror := make(chan []byte, 8)
	go func() {
		for chunk := range mirror {
			if _, err := dest.Write(chunk); err != nil {
				for range mirror { // keep draining, drop the rest
				}
				return
			}
		}
	}()
	defer close(mirror)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			last.write(buf[:n])
			select {
			case mirror <- bytes.Clone(buf[:n]):
			default:
				logger.Debug("upstream stderr destination is slow; dropping output", "bytes", n)
			}
		}
		if err != nil {
			return
		}
	}
}

// tailLine keeps the last non-empty line written to it (at most
// tailLineMax bytes of it): what an upstream said last before it exited.
type tailLine struct {
	mu   sync.Mutex
	cur  []byte // the line being written
	done string // the last complete non-empty line
}

const tailLineMax = 1 << 10

func (l *tailLine) write(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			l.cur = append(l.cur, b[:min(len(b), tailLineMax-len(l.cur))]...)
			return
		}
		l.cur = append(l.cur, b[:min(i, tailLineMax-len(l.cur))]...)
		if line := strings.TrimSpace(string(l.cur)); line != "" {
			l.done = line
		}
		l.cur, b = l.cur[:0], b[i+1:]
	}
}

// line is the last non-empty line, a final one without its newline too.
func (l *tailLine) line() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if line := strings.TrimSpace(string(l.cur)); line != "" {
		return line
	}
	return l.done
}

// ExitError says that a stdio upstream's process exited: how, and the last
// line it wrote on its stderr, which usually says why.
type ExitError struct {
	AtStart bool   // before it answered initialize and tools/list
	Status  string // "exit status 1", "signal: killed"
	Stderr  string // its last stderr line; "" when it wrote none
}

func (e *ExitError) Error() string {
	at := ""
	if e.AtStart {
		at = " at start"
	}
	said := "it wrote nothing on stderr"
	if e.Stderr != "" {
		said = fmt.Sprintf("its last stderr line: %q", oneline.Of(e.Stderr, 300))
	}
	return fmt.Sprintf("the upstream exited%s with %s; %s", at, e.Status, said)
}

// exitError is the upstream's exit once its process has exited, nil while
// it runs. Helpers of its process group that still hold its stderr are
// asked to end first (SIGTERM; Close escalates), so that its last line is
// read.
func (t *stdioTransport) exitError(atStart bool) *ExitError {
	if t.cmd == nil || t.cmd.Process == nil {
		return nil
	}
	// A process that closed its stdout is seen to have exited a moment
	// later.
	var status string
	for i := 0; ; i++ {
		var ok bool
		if status, ok = exitStatusNow(t.cmd.Process.Pid); ok {
			break
		}
		if i == 100 {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
	if canSignalGroups {
		signalGroup(t.cmd.Process.Pid, syscall.SIGTERM)
	}
	select {
	case <-t.drained:
	case <-time.After(2 * time.Second): // a stderr held open elsewhere
	}
	return &ExitError{AtStart: atStart, Status: status, Stderr: t.lastErr.line()}
}

// upMessage is every message the upstream sends, decoded once.
type upMessage struct {
	ID     msgID           `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// readLoop reads the upstream's lines until its stdout ends, answering
// pending requests on this goroutine. A line longer than max is never held
// whole: past max it is dropped as it streams (only its id is kept), and
// the request it answers fails at once with errUpstreamTooLarge.
func (t *stdioTransport) readLoop(r *bufio.Reader) {
	if t.onEOF != nil {
		defer t.onEOF()
	}
	max := t.max
	if max <= 0 {
		max = DefaultMaxMessageBytes
	}
	var long []byte // a line longer than r's buffer, reassembled
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			size := len(line)
			var over *idScanner // set once the line is known to be too long
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = r.ReadSlice('\n')
				size += len(line)
				switch {
				case over != nil:
					over.feed(line)
				case size > max:
					over = &idScanner{}
					over.feed(long)
					over.feed(line)
					long = nil // returned to the heap now, not at the line's end
					t.tooLarge(over.id(), max)
				default:
					long = append(long, line...)
				}
			}
			if over != nil {
				t.logger.Error("discarded a message from the upstream larger than the limit", "bytes", size, "limit", max)
				line = nil
			} else {
				line = long
			}
		}
		if err != nil {
			if err != io.EOF && !errors.Is(err, fs.ErrClosed) {
				t.logger.Error("reading the upstream's stdout", "err", err)
			}
			t.awaitExit()
			t.shut()
			return
		}
		if line == nil {
			continue // too long: dropped
		}
		if t.stopped.Load() {
			return // closed: nothing more is delivered
		}
		t.dispatch(line)
		if cap(long) > 1<<20 {
			long = nil // do not keep one huge answer's buffer for good
		}
	}
}

// errUpstreamTooLarge answers a request whose answer was longer than the
// limit: the upstream ran it, its answer was dropped unread.
type errUpstreamTooLarge struct{ max int }

func (e errUpstreamTooLarge) Error() string {
	return fmt.Sprintf("upstream answer larger than the limit of %d bytes (--max-message-bytes); it was discarded", e.max)
}

// tooLarge fails the pending request id (the id of a line past the limit)
// at once, before the rest of the line has arrived.
func (t *stdioTransport) tooLarge(id json.RawMessage, max int) {
	var m msgID
	if id == nil || m.UnmarshalJSON(id) != nil || !m.isInt {
		return // not an answer of ours: nothing waits for it
	}
	t.mu.Lock()
	p := t.pending[m.n]
	delete(t.pending, m.n)
	t.mu.Unlock()
	if p == nil {
		return
	}
	err := errUpstreamTooLarge{max: max}
	if p.done != nil {
		p.done(nil, nil, err)
	} else {
		p.ch <- callAnswer{err: err}
	}
}

// dispatch routes one line: an answer to its pending request, a request from
// the server to the request handler, a notification to the notification
// handler. Lines that are not JSON-RPC are skipped, as mcp-go does.
func (t *stdioTransport) dispatch(line []byte) {
	var m upMessage
	if !m.scan(line) {
		if err := json.Unmarshal(line, &m); err != nil {
			return
		}
	}
	switch {
	case m.Method != "" && !m.ID.present:
		// The same decode as mcp-go's, so handlers see identical params.
		var n mcp.JSONRPCNotification
		if err := json.Unmarshal(line, &n); err != nil {
			return
		}
		if t.onNotify != nil {
			t.onNotify(n)
		}
	case m.Method != "":
		var req transport.JSONRPCRequest
		if err := json.Unmarshal(line, &req); err != nil {
			return
		}
		t.handleRequest(req)
	default:
		if !m.ID.isInt {
			return
		}
		id := m.ID.n
		t.mu.Lock()
		p := t.pending[id]
		delete(t.pending, id)
		t.mu.Unlock()
		if p == nil {
			return // forgotten, or never ours
		}
		if p.done != nil {
			var rpcErr *RPCError
			if m.Error != nil {
				rpcErr = &RPCError{Code: m.Error.Code, Message: m.Error.Message}
			}
			p.done(m.Result, rpcErr, nil)
			return
		}
		resp := &transport.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id), Result: m.Result}
		if m.Error != nil {
			d := mcp.JSONRPCErrorDetails{Code: m.Error.Code, Message: m.Error.Message}
			if len(m.Error.Data) > 0 {
				d.Data = m.Error.Data
			}
			resp.Error = &d
		}
		p.ch <- callAnswer{resp: resp}
	}
}

// scan reads an answer's members with wire.ScanEnvelope, which
// costs a fraction of encoding/json's decode; false leaves the line to
// encoding/json (a request or notification from the server, or anything
// wire.ScanEnvelope does not read as plain).
func (m *upMessage) scan(line []byte) bool {
	env, ok := wire.ScanEnvelope(line)
	if !ok || env.Method != nil {
		return false
	}
	if env.ID != nil {
		if m.ID.UnmarshalJSON(env.ID) != nil {
			return false
		}
	}
	if env.Err != nil && string(env.Err) != "null" {
		if json.Unmarshal(env.Err, &m.Error) != nil {
			return false
		}
	}
	if env.Result != nil {
		// The line is the reader's buffer, read again after dispatch.
		m.Result = append(json.RawMessage(nil), env.Result...)
	}
	return true
}

// msgID is a message's id, read without keeping a copy: present unless
// absent or null; isInt when an integer, or a number with an integral value
// (mcp-go matches those too).
type msgID struct {
	present, isInt bool
	n              int64
}

func (m *msgID) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*m = msgID{}
		return nil
	}
	*m = msgID{present: true}
	if n, err := strconv.ParseInt(string(b), 10, 64); err == nil {
		m.n, m.isInt = n, true
	} else if f, err := strconv.ParseFloat(string(b), 64); err == nil && f == math.Trunc(f) && math.Abs(f) <= 1<<62 {
		m.n, m.isInt = int64(f), true
	}
	return nil
}

// handleRequest answers a request from the server with the request handler,
// on its own goroutine as mcp-go does: writing the answer must not hold up
// the reader (the server may be blocked writing to us).
func (t *stdioTransport) handleRequest(req transport.JSONRPCRequest) {
	h := t.onRequest
	go func() {
		var resp *transport.JSONRPCResponse
		switch {
		case h == nil:
			resp = transport.NewJSONRPCErrorResponse(req.ID, mcp.METHOD_NOT_FOUND, "No request handler configured", nil)
		case t.ctx.Err() != nil:
			resp = transport.NewJSONRPCErrorResponse(req.ID, mcp.INTERNAL_ERROR, t.ctx.Err().Error(), nil)
		default:
			r, err := h(t.ctx, req)
			if err != nil {
				r = transport.NewJSONRPCErrorResponse(req.ID, mcp.INTERNAL_ERROR, err.Error(), nil)
			}
			resp = r
		}
		if resp == nil {
			return
		}
		b, err := json.Marshal(resp)
		if err != nil {
			t.logger.Error("encoding an answer to the upstream", "err", err)
			return
		}
		if err := t.writeOrShut(append(b, '\n')); err != nil {
			t.logger.Error("writing an answer to the upstream", "err", err)
		}
	}()
}

// shut marks the transport closed and fails every pending request, each
// exactly once: with errNotSent when the upstream is known never to have
// read it (unreadFrom), else with transport.ErrTransportClosed (it may or
// may not have run).
func (t *stdioTransport) shut() {
	t.mu.Lock()
	t.closed = true
	pending := t.pending
	t.pending = map[int64]*pendingCall{}
	t.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	from := t.unreadFrom()
	for _, p := range pending {
		err := transport.ErrTransportClosed
		if st := p.start.Load(); from >= 0 && st > 0 && st-1 >= from {
			err = errNotSent{why: "the upstream exited with the request unread"}
		}
		if p.done != nil {
			p.done(nil, nil, err)
		} else {
			p.ch <- callAnswer{err: err}
		}
	}
}

// awaitExit waits a little for the process to exit after its stdout
// ended with requests pending: a process that dies closes its files just
// before it is seen to have exited, and only then is what it never read
// known (unreadFrom).
func (t *stdioTransport) awaitExit() {
	t.mu.Lock()
	n := len(t.pending)
	t.mu.Unlock()
	if n == 0 || t.cmd == nil || t.cmd.Process == nil {
		return
	}
	for range 100 {
		if exitedNow(t.cmd.Process.Pid) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// unreadFrom is the offset in stdin from which the upstream read nothing,
// once its process has exited: what is still in the pipe was never read.
// What the rest of its process group may still read is ended first
// (SIGKILL: the upstream is gone, its helpers go with it). -1 when not
// known (the process runs, or the pipe cannot be asked).
func (t *stdioTransport) unreadFrom() int64 {
	if t.cmd == nil || t.cmd.Process == nil || !exitedNow(t.cmd.Process.Pid) {
		return -1
	}
	if canSignalGroups {
		signalGroup(t.cmd.Process.Pid, syscall.SIGKILL)
	}
	// A write that has put its line in the pipe may not have counted it
	// yet (its goroutine descheduled after write(2)): counted against the
	// pipe, the line would look unread though the upstream read it. Its
	// write returns once the readers are gone (EPIPE), so the lock comes;
	// if it does not, what was read is not known.
	if !t.lockWrites(time.Second) {
		return -1
	}
	defer t.wmu.Unlock()
	n, ok := pipeUnread(t.stdin)
	if !ok {
		return -1
	}
	return t.written.Load() - int64(n)
}

// lockWrites takes wmu within d; false if it could not.
func (t *stdioTransport) lockWrites(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !t.wmu.TryLock() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// writeLine writes one whole line, the line of request p if not nil. A
// failed write means the command no longer reads: the caller takes its own
// request back, then closes the transport (shut), which fails the others.
// Nothing written (EPIPE) is errNotSent.
func (t *stdioTransport) writeLine(b []byte, p *pendingCall) error {
	t.wmu.Lock()
	if p != nil {
		p.start.Store(t.written.Load() + 1)
	}
	n, err := t.w.Write(b)
	t.written.Add(int64(n))
	t.wmu.Unlock()
	if err != nil {
		if n == 0 {
			return fmt.Errorf("write to the upstream: %w (%v)", errNotSent{why: "the upstream no longer reads its stdin (nothing was written)"}, err)
		}
		return fmt.Errorf("write to the upstream: %w (%v)", transport.ErrTransportClosed, err)
	}
	return nil
}

// writeOrShut writes a line that is no request's and closes the transport
// when that fails.
func (t *stdioTransport) writeOrShut(b []byte) error {
	err := t.writeLine(b, nil)
	if err != nil {
		t.shut()
	}
	return err
}

// register adds a pending request, unless the transport is closed.
func (t *stdioTransport) register(id int64, p *pendingCall) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errNotSent{why: "the upstream connection was closed"}
	}
	if _, dup := t.pending[id]; dup {
		return fmt.Errorf("request id %d is already pending", id)
	}
	t.pending[id] = p
	return nil
}

// unregister removes id's pending request p; false when it was already
// taken (answered, failed or forgotten).
func (t *stdioTransport) unregister(id int64, p *pendingCall) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pending[id] != p {
		return false
	}
	delete(t.pending, id)
	return true
}

// SendAsync writes line, one JSON-RPC request whose id is id ending in a
// newline (one is added if missing), and returns without waiting. done is
// called exactly once with the answer's result or error, or with
// transport.ErrTransportClosed when the connection ends first, on the
// goroutine that read the answer (or that saw the end), with no lock held.
// When SendAsync returns an error, done is never called.
func (t *stdioTransport) SendAsync(id int64, line []byte, done func(result json.RawMessage, rpcErr *RPCError, err error)) error {
	if len(line) == 0 || line[len(line)-1] != '\n' {
		line = append(line[:len(line):len(line)], '\n')
	}
	p := &pendingCall{done: done}
	if err := t.register(id, p); err != nil {
		return err
	}
	if err := t.writeLine(line, p); err != nil {
		// Taken back before the others fail, so the caller learns what
		// the write did (errNotSent: nothing was sent).
		mine := t.unregister(id, p)
		t.shut()
		if mine {
			return err
		}
		// Already failed by a concurrent shut (or answered): done reports it.
	}
	return nil
}

// Forget abandons the pending asynchronous request id: true when it was
// still pending (its done will never run), false when done already ran or
// is running.
func (t *stdioTransport) Forget(id int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.pending[id]; ok && p.done != nil {
		delete(t.pending, id)
		return true
	}
	return false
}

// SendRequest sends request and waits for its answer or ctx's end.
func (t *stdioTransport) SendRequest(ctx context.Context, request transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	id, ok := request.ID.Value().(int64)
	if !ok {
		return nil, fmt.Errorf("stdio transport: request id %v is not an integer", request.ID.Value())
	}
	var b []byte
	var err error
	if raw, ok := request.Params.(json.RawMessage); ok {
		b, err = wire.RequestLine(id, request.Method, raw) // params as given: no reflective encode
	} else if b, err = json.Marshal(request); err == nil {
		b = append(b, '\n')
	}
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	p := &pendingCall{ch: make(chan callAnswer, 1)}
	if err := t.register(id, p); err != nil {
		return nil, err
	}
	if err := t.writeLine(b, p); err != nil {
		mine := t.unregister(id, p)
		t.shut()
		if mine {
			return nil, err
		}
	}
	select {
	case a := <-p.ch:
		return a.resp, a.err
	case <-ctx.Done():
		if !t.unregister(id, p) {
			// Answered (or failed) meanwhile: that outcome stands.
			a := <-p.ch
			return a.resp, a.err
		}
		return nil, ctx.Err()
	}
}

// SendNotification writes one notification.
func (t *stdioTransport) SendNotification(ctx context.Context, n mcp.JSONRPCNotification) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return transport.ErrTransportClosed
	}
	b, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("encode notification: %w", err)
	}
	return t.writeOrShut(append(b, '\n'))
}

// SetNotificationHandler sets the notification handler; call it before
// Start.
func (t *stdioTransport) SetNotificationHandler(h func(mcp.JSONRPCNotification)) { t.onNotify = h }

// SetRequestHandler sets the handler of the server's requests; call it
// before Start.
func (t *stdioTransport) SetRequestHandler(h transport.RequestHandler) { t.onRequest = h }

// GetSessionId is empty: stdio has no session.
func (t *stdioTransport) GetSessionId() string { return "" }

// Close fails the pending requests and ends the command and its process
// group: close its stdin and wait 2s for it to exit, then SIGTERM to the
// group and 3s, then SIGKILL to the group and 3s. What is left of the group
// once the command exited (children it started) gets SIGTERM and, 3s
// later, SIGKILL.
func (t *stdioTransport) Close() error {
	t.stopped.Store(true)
	t.shut()
	t.cleanupOnce.Do(func() {
		if t.stdin == nil || t.cmd.Process == nil {
			return // never started
		}
		if err := t.stdin.Close(); err != nil {
			t.closeErr = fmt.Errorf("close stdin: %w", err)
		}
		waited := make(chan error, 1)
		go func() { waited <- t.cmd.Wait() }()
		wait := func(d time.Duration) bool {
			select {
			case err := <-waited:
				if err != nil && t.closeErr == nil {
					t.closeErr = err
				}
				return true
			case <-time.After(d):
				return false
			}
		}
		pid := t.cmd.Process.Pid
		defer endGroup(pid)
		if wait(stdioGracefulTimeout) {
			return
		}
		// Where SIGTERM cannot be sent (Windows) the kill comes at once.
		if canSignalGroups {
			signalGroup(pid, syscall.SIGTERM)
			if wait(stdioForceTimeout) {
				return
			}
			signalGroup(pid, syscall.SIGKILL)
		} else if t.cmd.Process.Signal(syscall.SIGTERM) == nil && wait(stdioForceTimeout) {
			return
		}
		if err := t.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) && t.closeErr == nil {
			t.closeErr = fmt.Errorf("kill: %w", err)
		}
		if !wait(stdioForceTimeout) && t.closeErr == nil {
			t.closeErr = transport.ErrChildShutdownTimeout
		}
	})
	return t.closeErr
}

// endGroup ends what is left of the process group pid led once its leader
// has exited: SIGTERM, then SIGKILL after stdioForceTimeout if any process
// of it is still there.
func endGroup(pid int) {
	if !canSignalGroups || !signalGroup(pid, syscall.SIGTERM) {
		return
	}
	deadline := time.Now().Add(stdioForceTimeout)
	for time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		if !signalGroup(pid, 0) {
			return
		}
	}
	signalGroup(pid, syscall.SIGKILL)
}

// notSentWhy is the errNotSent inside err, as text.
func notSentWhy(err error) string {
	var ns errNotSent
	switch {
	case errors.As(err, &ns):
		return ns.Error()
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the upstream refused the connection: the request was not sent"
	}
	return err.Error() + ": the request was not sent"
}
