// Package testupstream is an MCP upstream for fault and benchmark tests: a
// trivial fast tool, slow, progress, flooding, sampling and elicitation tools,
// and process-level fault modes (exit at start, exit mid-call, hang, garbage).
// cmd/testupstream is its executable; tests build it once per test binary.
package testupstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/planlock/planlock/internal/mcpserve"
)

// Mode is a fault the upstream plays.
type Mode string

// The modes. Each is chosen with --mode or TESTUPSTREAM_MODE.
const (
	Normal       Mode = "normal"        // answer everything properly
	ExitAtStart  Mode = "exit-at-start" // exit with ExitCodeAtStart before reading anything
	ExitMidCall  Mode = "exit-mid-call" // exit with ExitCodeMidCall when the Nth tools/call arrives (--exit-after N, default 1)
	Hang         Mode = "hang"          // read requests, never answer any (not even initialize)
	HangCall     Mode = "hang-call"     // answer initialize and tools/list, never answer tools/call
	Garbage      Mode = "garbage"       // answer every request with a line of non-JSON text
	GarbageStart Mode = "garbage-start" // print non-JSON lines first, then serve normally
	GarbageCall  Mode = "garbage-call"  // serve normally but answer tools/call with non-JSON text
	Flood        Mode = "flood"         // every tools/call streams log notifications without end
	// RefuseVersions answers every request with -32022 (unsupported
	// protocol version) naming only RefusedVersionSupported, over HTTP
	// with a 400, as a server of a protocol planlock does not speak.
	RefuseVersions Mode = "refuse-versions"
	// MultiRound answers the tool "ask", the resource test://ask/… and the
	// prompt "ask" with a raw result of the resultType asked for (multiround.go),
	// as an upstream of protocol 2026-07-28 would whatever the client speaks.
	MultiRound Mode = "multi-round"
	// Huge answers every tools/call over stdio with one line of HugeBytes
	// bytes that never ends (no newline), then writes nothing more.
	Huge Mode = "huge"
	// Deaf serves normally but ignores SIGTERM, SIGINT and SIGHUP, and
	// does not exit when its stdin ends: only SIGKILL ends it.
	Deaf Mode = "deaf"
	// ExitOnDiscover (stdio) exits with ExitCodeOnDiscover when its first
	// request is server/discover, as legacy servers built on SDKs that end
	// on any request before initialize do; otherwise it serves normally.
	ExitOnDiscover Mode = "exit-on-discover"
)

// Modes lists every mode, for usage text and validation.
var Modes = []Mode{Normal, ExitAtStart, ExitMidCall, Hang, HangCall, Garbage, GarbageStart, GarbageCall, Flood, RefuseVersions, MultiRound, Huge, Deaf, ExitOnDiscover, ToolDefs}

// Exit codes of the exiting modes, so a test can tell them from a crash.
const (
	ExitCodeAtStart    = 3
	ExitCodeMidCall    = 4
	ExitCodeOnDiscover = 5
)

// GarbageLine is what the garbage modes print instead of JSON-RPC.
const GarbageLine = "this is not JSON-RPC <<<garbage>>> {"

// Config configures one upstream process.
type Config struct {
	Mode      Mode
	ExitAfter int    // ExitMidCall: exit on this tools/call (1-based); 0 means 1
	CallsLog  string // append every tools/call received as a JSON line; "" = none
	HTTPAddr  string // "" = stdio
	// Conformance adds the tools the conformance suite's server scenarios call.
	Conformance bool
	// ToolsFile is ToolDefs' file of tool definitions.
	ToolsFile string
	// HugeBytes is the length of Huge's unending line; 0 means 768 MiB.
	HugeBytes int64
	// Exit ends the process; tests may replace it. Defaults to os.Exit.
	Exit func(code int)
}

// ParseMode checks a mode name.
func ParseMode(s string) (Mode, error) {
	if s == "" {
		return Normal, nil
	}
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	names := make([]string, len(Modes))
	for i, m := range Modes {
		names[i] = string(m)
	}
	return "", fmt.Errorf("unknown mode %q (one of %s)", s, strings.Join(names, ", "))
}

// Run plays cfg until ctx ends, stdin closes or the mode exits the process.
func Run(ctx context.Context, cfg Config, stdin io.Reader, stdout, stderr io.Writer) error {
	if cfg.Exit == nil {
		cfg.Exit = os.Exit
	}
	switch cfg.Mode {
	case ExitAtStart:
		fmt.Fprintln(stderr, "testupstream: exiting at start as asked")
		cfg.Exit(ExitCodeAtStart)
		return nil
	case Hang:
		if cfg.HTTPAddr == "" {
			// Drain stdin so the client's writes never block; answer nothing.
			_, _ = io.Copy(io.Discard, stdin)
			return nil
		}
	case Garbage:
		if cfg.HTTPAddr == "" {
			return answerGarbage(stdin, stdout)
		}
	case RefuseVersions:
		if cfg.HTTPAddr == "" {
			return answerRefusals(stdin, stdout)
		}
	case ExitOnDiscover:
		if cfg.HTTPAddr == "" {
			br := bufio.NewReader(stdin)
			first, err := br.ReadBytes('\n')
			var m struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(first, &m) == nil && m.Method == string(mcp.MethodServerDiscover) {
				fmt.Fprintln(stderr, "testupstream: unknown request before initialize; exiting")
				cfg.Exit(ExitCodeOnDiscover)
				return nil
			}
			if err != nil && len(first) == 0 {
				return nil // stdin ended
			}
			stdin = io.MultiReader(bytes.NewReader(first), br)
		}
	}

	rec, err := openRecorder(cfg.CallsLog)
	if err != nil {
		return err
	}
	defer rec.close()
	if cfg.Mode == ToolDefs {
		return serveToolDefs(ctx, cfg, stdin, stdout, rec)
	}
	var out *lockedWriter // stdio only
	if cfg.HTTPAddr == "" {
		out = newLockedWriter(stdout)
		if cfg.Mode == GarbageStart {
			fmt.Fprintf(out, "%s\nstarting up...\n", GarbageLine)
		}
	}
	s := newServer(cfg, out, rec)
	if (cfg.Mode == MultiRound || cfg.Conformance) && out != nil {
		stdin = rawAnswers(stdin, out, rec, cfg.Mode == MultiRound, cfg.Conformance)
	}
	return mcpserve.Serve(ctx, s, mcpserve.Options{
		HTTPAddr: cfg.HTTPAddr, Stdin: stdin, Stdout: out, Log: stderr,
		WrapHTTP: func(h http.Handler) http.Handler { return httpFaults(cfg.Mode, cfg.Conformance, h, rec) },
		// Without an event store mcp-go v1.2.1 can drop a notification that
		// races the end of its request; with one it delivers it in order.
		HTTPOptions: []server.StreamableHTTPOption{server.WithEventStore(server.NewInMemoryEventStore())},
	})
}

// writeHuge writes the start of an answer to id whose text runs n bytes
// and never ends, in pieces, holding the writer throughout.
func writeHuge(out *lockedWriter, id any, n int64) {
	if n <= 0 {
		n = 768 << 20
	}
	idJSON, _ := json.Marshal(id)
	out.mu.Lock()
	defer out.mu.Unlock()
	fmt.Fprintf(out.w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, idJSON)
	chunk := []byte(strings.Repeat("x", 1<<20))
	for ; n > 0; n -= int64(len(chunk)) {
		if _, err := out.w.Write(chunk[:min(int64(len(chunk)), n)]); err != nil {
			return
		}
	}
}

// recorder appends every tools/call received to the calls log.
type recorder struct {
	mu sync.Mutex
	f  *os.File
}

func openRecorder(path string) (*recorder, error) {
	if path == "" {
		return &recorder{}, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open calls log: %w", err)
	}
	return &recorder{f: f}, nil
}

func (r *recorder) record(tool string, args json.RawMessage) {
	if r.f == nil {
		return
	}
	if len(args) == 0 {
		args = json.RawMessage("null")
	}
	line, err := json.Marshal(map[string]any{"time": time.Now().UTC(), "tool": tool, "arguments": args})
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// One write per line with O_APPEND: a reader never sees half a record,
	// and the record is in the file before the process can exit mid-call.
	_, _ = r.f.Write(append(line, '\n'))
}

func (r *recorder) close() {
	if r.f != nil {
		_ = r.f.Close()
	}
}

// newServer builds the MCP server of a mode that speaks MCP. out is the
// stdio writer (nil over HTTP).
func newServer(cfg Config, out *lockedWriter, rec *recorder) *server.MCPServer {
	exitAfter := int64(cfg.ExitAfter)
	if exitAfter <= 0 {
		exitAfter = 1
	}
	var calls atomic.Int64
	hooks := &server.Hooks{}
	hooks.AddBeforeCallTool(func(ctx context.Context, id any, req *mcp.CallToolRequest) {
		n := calls.Add(1)
		args, _ := json.Marshal(req.GetRawArguments())
		rec.record(req.Params.Name, args)
		switch cfg.Mode {
		case ExitMidCall:
			if n >= exitAfter {
				cfg.Exit(ExitCodeMidCall)
			}
		case HangCall:
			<-ctx.Done()
			select {} // never answer, even after a cancellation
		case GarbageCall:
			if out != nil {
				fmt.Fprintln(out, GarbageLine)
				select {} // the garbage was the answer
			}
		case Huge:
			if out != nil {
				writeHuge(out, id, cfg.HugeBytes)
				select {} // the line never ends
			}
		}
	})
	opts := []server.ServerOption{
		server.WithToolCapabilities(false),
		server.WithLogging(),
		server.WithHooks(hooks),
		//lint:ignore SA1019 the test upstream plays server-initiated requests of the 2025 protocol versions, which the proxy must refuse at once
		server.WithLegacyServerInitiatedRequests(),
	}
	if cfg.Mode == MultiRound {
		// Its resources can be subscribed to, so that a proxy in front
		// announces subscriptions (legacy resources/subscribe and the
		// resourceSubscriptions of subscriptions/listen).
		// And it completes prompt arguments (completion/complete), so
		// that a proxy in front announces completions.
		opts = append(opts, server.WithResourceCapabilities(true, true), server.WithCompletions(),
			server.WithPromptCompletionProvider(completer{}))
	}
	s := server.NewMCPServer("testupstream", "1.0.0", opts...)
	t := &tools{s: s, mode: cfg.Mode, out: out}
	s.AddTool(mcp.NewTool("echo", mcp.WithDescription("Return the message unchanged (the trivial fast tool)."),
		mcp.WithString("message", mcp.Required(), mcp.Description("Text to echo"))), t.echo)
	s.AddTool(mcp.NewTool("slow", mcp.WithDescription("Sleep ms milliseconds, then answer; cancellable."),
		mcp.WithNumber("ms", mcp.Required(), mcp.Description("Milliseconds to sleep"))), t.slow)
	s.AddTool(mcp.NewTool("progress", mcp.WithDescription("Send steps progress notifications to the caller's progress token, then answer."),
		mcp.WithNumber("steps", mcp.Required(), mcp.Description("Number of notifications"))), t.progress)
	s.AddTool(mcp.NewTool("flood", mcp.WithDescription("Stream log notifications without end; never answers unless cancelled.")), t.flood)
	s.AddTool(mcp.NewTool("big", mcp.WithDescription("Answer with a text of the given size."),
		mcp.WithNumber("bytes", mcp.Required(), mcp.Description("Size of the answer"))), t.big)
	s.AddTool(mcp.NewTool("sample", mcp.WithDescription("Ask the client to sample an LLM message (server-to-client request) and return its text."),
		mcp.WithString("prompt", mcp.Required())), t.sample)
	s.AddTool(mcp.NewTool("elicit", mcp.WithDescription("Ask the client to elicit input from the user (server-to-client request) and return the answer."),
		mcp.WithString("message", mcp.Required())), t.elicit)
	if cfg.Conformance {
		addConformanceTools(s, t)
		addConformanceMRTR(s)
	}
	if cfg.Mode == MultiRound {
		addMultiRound(s)
	}
	return s
}

type tools struct {
	s    *server.MCPServer
	mode Mode
	out  *lockedWriter // stdio only
}

func (t *tools) echo(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if t.mode == Flood {
		return t.flood(ctx, req)
	}
	return mcp.NewToolResultText(req.GetString("message", "")), nil
}

func (t *tools) slow(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if t.mode == Flood {
		return t.flood(ctx, req)
	}
	d := time.Duration(req.GetFloat("ms", 0) * float64(time.Millisecond))
	select {
	case <-time.After(d):
		return mcp.NewToolResultText(fmt.Sprintf("slept %s", d)), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("slow call cancelled: %w", ctx.Err())
	}
}

// progressLead is how long the progress tool waits before its first
// notification.
const progressLead = 50 * time.Millisecond

func (t *tools) progress(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	steps := int(req.GetFloat("steps", 0))
	var token mcp.ProgressToken
	if req.Params.Meta != nil {
		token = req.Params.Meta.ProgressToken
	}
	if token != nil {
		// A proxy in front serving HTTP with mcp-go 1.2.1 may still run the
		// forwarder of the client's previous request, which can take a
		// notification off the session's queue and drop it (a known limit,
		// docs/proxy.md). This peer exists to test relaying, not that race:
		// give such a forwarder a moment to end first.
		select {
		case <-time.After(progressLead):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	sent := 0
	before := 0
	if t.out != nil {
		before = t.out.progressWritten(token)
	}
	if token != nil {
		for i := 1; i <= steps; i++ {
			err := t.s.SendNotificationToClient(ctx, "notifications/progress", map[string]any{
				"progressToken": token, "progress": i, "total": steps, "message": fmt.Sprintf("step %d of %d", i, steps),
			})
			if err != nil {
				return nil, fmt.Errorf("send progress: %w", err)
			}
			sent++
		}
	}
	// Over stdio mcp-go writes notifications from another goroutine than the
	// response, so the answer could overtake them and the client would drop
	// them as late. Answer only once they are on the wire. (HTTP drains them
	// into the response stream first by itself.)
	if t.out != nil {
		if err := t.out.waitProgress(ctx, token, before+sent); err != nil {
			return nil, fmt.Errorf("wait for progress notifications: %w", err)
		}
	} else if sent > 0 {
		// Over HTTP mcp-go 1.2.1 hands notifications to a forwarder
		// goroutine; under load an answer sent at once can still overtake
		// the last of them and the client then drops it as late. This peer
		// exists to test relaying, not that race: give the forwarder a
		// moment before answering.
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return mcp.NewToolResultText(fmt.Sprintf("sent %d progress notifications", sent)), nil
}

func (t *tools) flood(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("flood stopped after %d notifications: %w", i, err)
		}
		err := t.s.SendNotificationToClient(ctx, "notifications/message", map[string]any{
			"level": "info", "logger": "flood", "data": fmt.Sprintf("notification %d", i),
		})
		if err != nil {
			// A full queue is backpressure, not the end: keep flooding.
			time.Sleep(time.Millisecond)
		}
	}
}

func (t *tools) big(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	n := int(req.GetFloat("bytes", 0))
	if n < 0 || n > 1<<30 {
		return mcp.NewToolResultError(fmt.Sprintf("bytes %d out of range 0..2^30", n)), nil
	}
	return mcp.NewToolResultText(strings.Repeat("x", n)), nil
}

func (t *tools) sample(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	cm := mcp.CreateMessageRequest{}
	cm.CreateMessageParams.Messages = []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.TextContent{Type: "text", Text: req.GetString("prompt", "")}}}
	cm.CreateMessageParams.MaxTokens = 100
	//lint:ignore SA1019 a server-initiated request of the 2025 protocol versions, which the proxy must refuse at once
	res, err := t.s.RequestSampling(ctx, cm)
	if err != nil {
		return mcp.NewToolResultError(fmt.Sprintf("sampling failed: %v", err)), nil
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("encode sampling result: %w", err)
	}
	return mcp.NewToolResultText("sampled: " + string(b)), nil
}

func (t *tools) elicit(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	er := mcp.ElicitationRequest{}
	er.Params.Message = req.GetString("message", "")
	er.Params.RequestedSchema = map[string]any{
		"type":       "object",
		"properties": map[string]any{"answer": map[string]any{"type": "string"}},
		"required":   []string{"answer"},
	}
	res, err := t.s.RequestElicitation(ctx, er)
	if err != nil {
		return mcp.NewToolResultError(fmt.Sprintf("elicitation failed: %v", err)), nil
	}
	b, err := json.Marshal(res.ElicitationResponse)
	if err != nil {
		return nil, fmt.Errorf("encode elicitation result: %w", err)
	}
	return mcp.NewToolResultText("elicited: " + string(b)), nil
}

// answerGarbage answers each stdin line with a non-JSON line.
func answerGarbage(stdin io.Reader, stdout io.Writer) error {
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 64*1024), 64<<20)
	for sc.Scan() {
		if _, err := fmt.Fprintln(stdout, GarbageLine); err != nil {
			return fmt.Errorf("write garbage: %w", err)
		}
	}
	return nil
}

// RefusedVersionSupported is the only protocol version RefuseVersions names.
const RefusedVersionSupported = "2099-01-01"

// refusal is the -32022 answer to a request of id.
func refusal(id json.RawMessage) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": mcp.UNSUPPORTED_PROTOCOL_VERSION,
		"message": "Unsupported protocol version", "data": map[string]any{"supported": []string{RefusedVersionSupported}}}})
	return b
}

// answerRefusals answers each request line on stdin with refusal.
func answerRefusals(stdin io.Reader, stdout io.Writer) error {
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 64*1024), 64<<20)
	for sc.Scan() {
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || len(m.ID) == 0 {
			continue // a notification
		}
		if _, err := fmt.Fprintf(stdout, "%s\n", refusal(m.ID)); err != nil {
			return fmt.Errorf("write refusal: %w", err)
		}
	}
	return nil
}

// httpFaults plays the wire-level modes over HTTP.
func httpFaults(mode Mode, conf bool, h http.Handler, rec *recorder) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if conf && mode != MultiRound && r.Method == http.MethodPost && answerRawHTTP(w, r, rec, false, true) {
			return
		}
		switch mode {
		case RefuseVersions:
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&m) != nil || len(m.ID) == 0 {
				w.WriteHeader(http.StatusAccepted)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write(refusal(m.ID))
			return
		case Hang:
			<-r.Context().Done()
			return
		case Garbage:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintln(w, GarbageLine)
			return
		case MultiRound:
			if r.Method == http.MethodPost && answerRawHTTP(w, r, rec, true, conf) {
				return
			}
		case GarbageCall:
			if r.Method == http.MethodPost {
				body, err := io.ReadAll(r.Body)
				if err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				var msg struct {
					Method string `json:"method"`
					Params struct {
						Name      string          `json:"name"`
						Arguments json.RawMessage `json:"arguments"`
					} `json:"params"`
				}
				if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" {
					rec.record(msg.Params.Name, msg.Params.Arguments)
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprintln(w, GarbageLine)
					return
				}
				r.Body = io.NopCloser(strings.NewReader(string(body)))
			}
		}
		h.ServeHTTP(w, r)
	})
}

// lockedWriter keeps whole lines from the server and from fault injection
// apart, and counts the progress notifications written, per progress token
// (calls in flight at once each wait for their own).
type lockedWriter struct {
	mu       sync.Mutex
	w        io.Writer
	progress map[string]int
	cond     *sync.Cond
}

func newLockedWriter(w io.Writer) *lockedWriter {
	l := &lockedWriter{w: w, progress: map[string]int{}}
	l.cond = sync.NewCond(&l.mu)
	return l
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.w.Write(p)
	if strings.Contains(string(p), `"method":"notifications/progress"`) {
		var msg struct {
			Params struct {
				Token any `json:"progressToken"`
			} `json:"params"`
		}
		_ = json.Unmarshal(p, &msg)
		l.progress[fmt.Sprint(msg.Params.Token)]++
		l.cond.Broadcast()
	}
	return n, err
}

func (l *lockedWriter) progressWritten(token mcp.ProgressToken) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.progress[fmt.Sprint(token)]
}

// waitProgress blocks until at least n progress notifications for token
// were written.
func (l *lockedWriter) waitProgress(ctx context.Context, token mcp.ProgressToken, n int) error {
	stop := context.AfterFunc(ctx, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.cond.Broadcast()
	})
	defer stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.progress[fmt.Sprint(token)] < n {
		if err := ctx.Err(); err != nil {
			return err
		}
		l.cond.Wait()
	}
	return nil
}
