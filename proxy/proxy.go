// Package proxy is planlock's MCP gate: an MCP server for the agent (stdio or
// streamable HTTP) in front of an MCP client to the real server (stdio or
// streamable HTTP). It shows the agent only the planned tools, checks every
// tools/call against the plan (package gate) and the durable state (package
// ledger), and forwards what the plan allows.
//
// Resources and prompts are served only when the plan has resource or
// prompt blocks, and then gated the same way (resources.go); without such
// blocks they are not exposed.
//
// # Public API
//
// proxy is one of planlock's four public packages (with hclplan, sign and
// gitapprove): it is what cmd/planlock runs, and what a program embedding
// the gate uses (New with a Config, then Run with ServeStdio or
// ServeListener; SetPlan to swap the plan). Its subpackages are public
// because an embedder needs them: ledger is the durable state a Config
// takes, planload loads and verifies the plan to give it, gate is the pure
// decision (for dry runs and plan tests), and holdreq is the contract a hold
// approver implements. The approval pull request backend (internal/approvals)
// is planlock's own: proxy depends on the holdreq contract only, so the relay
// does not depend on Git, GitHub or sigstore (internal/archtest checks it).
package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/oneline"
	"github.com/planlock/planlock/internal/wire"
	"github.com/planlock/planlock/proxy/ledger"
)

// State is what the proxy needs of the durable state; *ledger.Ledger has it.
type State interface {
	Progress(planDigest string) ledger.Progress
	Reserve(ctx context.Context, rv ledger.Reservation) (ledger.Ticket, error)
	Complete(ctx context.Context, t ledger.Ticket, o ledger.Outcome) error
	Block(ctx context.Context, c ledger.Call, reason string) error
	NewHold(ctx context.Context, c ledger.Call, spec ledger.HoldSpec) (ledger.Hold, error)
	FindHold(c ledger.Call) (ledger.Hold, bool)
	ListHolds() []ledger.Hold
}

// Config configures a Proxy.
type Config struct {
	Plan     *hclplan.Plan
	State    State
	Upstream UpstreamConfig
	// CallTimeout bounds each forwarded call; zero means 60s.
	CallTimeout time.Duration
	// MaxMessageBytes bounds one client message (a stdio line or an HTTP
	// body); larger ones get a JSON-RPC error unread. Zero means
	// DefaultMaxMessageBytes.
	MaxMessageBytes int
	// HoldTTL is how long a hold waits for approval; zero means 7 days.
	HoldTTL time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log receives one line per operational event (upstream restarts).
	Log     io.Writer
	Version string
	// Approvals, when set, turns holds into approval pull requests and
	// decides repeated held calls (holdpr.go); nil keeps holds in the state only.
	Approvals HoldApprover
	// Observe is the operator's observe mode (observe.go); the zero value
	// enforces the plan.
	Observe Observe
	// Observer, when set, is told what became of each tools/call
	// (internal/telemetry: metrics and traces).
	Observer CallObserver
	// RoundKey authenticates the requestState of multi-round calls
	// (multiround.go): every replica of a shared state needs the same one.
	// Empty means a random key of this process.
	RoundKey []byte
	// RoundTTL is how long an input_required result may be answered; zero
	// means DefaultRoundTTL.
	RoundTTL time.Duration
}

// Proxy is one running gate. Create it with New, then Serve (stdio) or ServeListener (streamable HTTP on a listener).
type Proxy struct {
	cfg Config
	up  *Upstream
	srv *server.MCPServer

	// cur is the plan calls are checked against; SetPlan swaps it (swap.go).
	cur atomic.Pointer[planState]
	// setMu serialises applyTools; raw is the upstream's last tools/list
	// (listed: there was one).
	setMu  sync.Mutex
	raw    []json.RawMessage
	listed bool
	defs   map[string]toolDef // raw by name, for the tool_pin check (tooldef.go)
	seen   map[string][]byte  // pinned definitions listed, by digest (tooldef.go)

	toolsMu sync.Mutex
	tools   map[string]bool // tools the upstream reported at its last initialisation; nil before

	progMu sync.Mutex
	progs  map[string]progressRoute
	progN  atomic.Int64
	// Notifications and answers reach a client by different goroutines; a
	// call's answer waits until its progress is written, or the client
	// would drop the progress as late (waitProgressWritten).
	stdioProg *sessionProgress // the one stdio client's (ServeStdio)
	sessMu    sync.Mutex
	sessions  map[string]*httpSession // registered HTTP sessions by ID (trackSession)

	inflight callsInFlight // tool calls being handled, for routeLog
	asking   askingCalls   // forwarded calls a legacy upstream may ask for input (legacyask.go)
	// The stdio client speaks protocol 2026-07-28 (it discovered the server
	// or sent a modern request): a log message goes to it only while a
	// call of it that asked for one is in flight (stdioAsks, routeLog).
	stdioModern atomic.Bool
	stdioAsks   logAsks

	ex     extras       // resources and prompts (resources.go)
	rounds *roundKeeper // multi-round requestStates (multiround.go)
	ostate *orderState  // cfg.State, keeping reads out of the step order

	// The stdio fast lane (fastlane.go): the calls it took, and (tests)
	// whether it is off.
	fastTaken  atomic.Int64
	noFastLane bool
	callable   atomic.Pointer[map[string]bool] // setServerTools
	// The server's identity, as it names itself in a modern result's
	// _meta, for the lanes' answers (laneera.go).
	serverInfo     mcp.Implementation
	serverInfoJSON []byte
}

// progressRoute sends an upstream progress token back to the client call
// that owns it, under the client's own token.
type progressRoute struct {
	ctx   context.Context
	token mcp.ProgressToken
	sent  *atomic.Int64 // notifications queued for this call
}

// New builds the proxy; nothing runs until Run.
func New(cfg Config) (*Proxy, error) {
	if cfg.Plan == nil || cfg.State == nil {
		return nil, errors.New("proxy: a plan and a state are required")
	}
	if len(cfg.Upstream.Command) == 0 && cfg.Upstream.URL == "" {
		return nil, errors.New("proxy: no upstream command or URL")
	}
	if err := checkObserve(cfg); err != nil {
		return nil, err
	}
	if err := checkCapabilities(cfg); err != nil {
		return nil, err
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 60 * time.Second
	}
	if cfg.HoldTTL <= 0 {
		cfg.HoldTTL = 7 * 24 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	p := &Proxy{cfg: cfg, progs: map[string]progressRoute{}, rounds: newRoundKeeper(cfg.RoundKey, cfg.RoundTTL)}
	p.serverInfo = mcp.Implementation{Name: "planlock", Version: cfg.Version}
	p.serverInfoJSON, _ = json.Marshal(p.serverInfo) // nil: the lanes encode with mcp-go
	p.ostate = &orderState{State: cfg.State, steps: map[string]int{}}
	p.cfg.State = p.ostate
	p.cur.Store(p.newPlanState(cfg.Plan))
	hooks := &server.Hooks{}
	p.setupExtras(hooks)
	hooks.AddAfterListTools(p.filterList)
	hooks.AddAfterDiscover(p.noteDiscover)
	hooks.AddBeforeAny(func(ctx context.Context, _ any, _ mcp.MCPMethod, _ any) {
		// A stdio client that sends a request of 2026-07-28 without
		// server/discover first is as modern (routeLog).
		if !p.stdioModern.Load() && server.IsModernRequest(ctx) {
			p.stdioModern.Store(true)
		}
	})
	hooks.AddOnError(p.auditUnknownTool)
	hooks.AddOnRegisterSession(func(_ context.Context, s server.ClientSession) { p.trackSession(s, true) })
	hooks.AddOnUnregisterSession(func(_ context.Context, s server.ClientSession) { p.trackSession(s, false) })
	p.srv = server.NewMCPServer(p.serverInfo.Name, p.serverInfo.Version,
		server.WithToolCapabilities(true),
		server.WithLogging(),
		server.WithHooks(hooks),
		server.WithRecovery(),
		server.WithToolHandlerMiddleware(p.inflight.middleware),
		server.WithInstructions(fmt.Sprintf("Tools are gated by planlock plan %q: %s. Calls outside the plan are blocked with the reason.", cfg.Plan.Name, cfg.Plan.Goal)),
	)
	if cfg.Upstream.InitTimeout <= 0 {
		cfg.Upstream.InitTimeout = min(cfg.CallTimeout, 30*time.Second)
	}
	cfg.Upstream.ClientName = "planlock"
	if cfg.Upstream.MaxMessageBytes <= 0 {
		cfg.Upstream.MaxMessageBytes = p.maxMessageBytes() // the upstream's messages are bounded as the client's
	}
	cfg.Upstream.ClientVersion = cfg.Version
	if cfg.Upstream.PreferModern == nil {
		cfg.Upstream.PreferModern = func() bool { return hasInputRules(p.Plan()) }
	}
	p.up = newUpstream(cfg.Upstream, p.relayNotification, p.setTools)
	p.up.onConnect = p.onConnect
	p.up.onAsk = p.answerUpstream
	p.up.legacyCaps = func() map[string]any { return legacyCapabilities(p.Plan()) }
	p.up.listenFilter = p.listenFilter
	p.setServerTools(p.placeholders(cfg.Plan))
	p.initExtras()
	return p, nil
}

// noteDiscover marks the stdio client modern once it sent server/discover
// (protocol 2026-07-28): log messages reach it as that era asks (routeLog).
// discover advertises logging, as initialize does: a request's log level
// is relayed upstream (loglevel.go).
func (p *Proxy) noteDiscover(_ context.Context, _ any, _ *mcp.DiscoverRequest, res *mcp.DiscoverResult) {
	if res == nil {
		return
	}
	p.stdioModern.Store(true)
}

// Run supervises the upstream until ctx ends. Serve* call it.
func (p *Proxy) Run(ctx context.Context) { p.up.Run(ctx) }

// WaitUpstream blocks until the upstream is initialised or ctx ends.
func (p *Proxy) WaitUpstream(ctx context.Context) error { return p.up.WaitReady(ctx) }

// setTools re-exposes the upstream's tools after each initialisation, with
// their raw schemas byte for byte. Every upstream tool is registered so that
// a call to an unplanned one reaches the gate (and the audit) instead of
// failing as unknown; tools/list shows only the planned ones (filterList).
func (p *Proxy) setTools(raw []json.RawMessage) { p.applyTools(raw, true) }

// applyTools registers the tools under the current plan: raw from the
// upstream, or (fromUpstream false, after SetPlan) its last list again.
func (p *Proxy) applyTools(raw []json.RawMessage, fromUpstream bool) {
	p.setMu.Lock()
	defer p.setMu.Unlock()
	if fromUpstream {
		p.raw, p.listed, p.defs = raw, true, readDefs(raw)
	} else {
		raw = p.raw
	}
	st := p.cur.Load()
	p.notePinned(st.plan)
	if !p.listed {
		p.setServerTools(p.placeholders(st.plan))
		return
	}
	var tools []server.ServerTool
	names := map[string]bool{}
	for _, r := range raw {
		t, err := rawTool(r)
		if err != nil {
			fmt.Fprintf(p.cfg.Log, "planlock proxy: skipping an upstream tool: %v\n", err)
			continue
		}
		if err := mcp.ValidateParamHeaderAnnotations(&t); err != nil {
			// A client must exclude such a tool (protocol 2026-07-28,
			// x-mcp-header), and mcp-go's server refuses to serve it: not
			// listed, not callable, whatever the plan says.
			fmt.Fprintf(p.cfg.Log, "planlock proxy: skipping upstream tool %q: invalid x-mcp-header annotations: %s\n", t.Name, oneline.Of(err.Error(), 200))
			continue
		}
		if why, changed := toolChanged(st.plan, p.defs, true, t.Name); changed {
			// Registered, so that a call reaches the gate (held or
			// blocked there), but never listed: the agent does not read a
			// definition the plan did not approve.
			fmt.Fprintf(p.cfg.Log, "planlock proxy: %s; the tool is hidden from the agent\n", why)
			tools = append(tools, server.ServerTool{Tool: t, Handler: p.handleCall})
			continue
		}
		names[t.Name] = true
		if st.gate.Planned(t.Name) {
			if t.Description != "" {
				t.Description += "\n\n"
			}
			t.Description += limitsLine(st.plan, t.Name)
		}
		tools = append(tools, server.ServerTool{Tool: t, Handler: p.handleCall})
	}
	for _, name := range st.plan.Tools() {
		if _, upstream := p.defs[name]; !names[name] && !upstream {
			// Not listed, but a call still reaches the gate and, if the plan
			// allows it, the upstream, which answers as it does.
			fmt.Fprintf(p.cfg.Log, "planlock proxy: warning: the plan's tool %q is not offered by the upstream\n", name)
			t := mcp.NewToolWithRawSchema(name, limitsLine(st.plan, name), json.RawMessage(`{"type":"object"}`))
			tools = append(tools, server.ServerTool{Tool: t, Handler: p.handleCall})
		}
	}
	p.toolsMu.Lock()
	p.tools = names
	p.toolsMu.Unlock()
	p.setServerTools(tools)
}

// setServerTools gives the MCP server its tools, and the stdio fast lane
// the names it may take a call of: those the server would run at once (a
// tool that requires task augmentation is left to the server).
func (p *Proxy) setServerTools(tools []server.ServerTool) {
	names := make(map[string]bool, len(tools))
	for _, t := range tools {
		names[t.Tool.Name] = t.Tool.Execution == nil || t.Tool.Execution.TaskSupport != mcp.TaskSupportRequired
	}
	p.srv.SetTools(tools...)
	p.callable.Store(&names)
}

// rawTool decodes a tools/list entry keeping inputSchema and outputSchema as
// the upstream wrote them.
func rawTool(r json.RawMessage) (mcp.Tool, error) {
	var t mcp.Tool
	if err := json.Unmarshal(r, &t); err != nil {
		return t, fmt.Errorf("bad tool definition: %w", err)
	}
	var schemas struct {
		Input  json.RawMessage `json:"inputSchema"`
		Output json.RawMessage `json:"outputSchema"`
	}
	if err := json.Unmarshal(r, &schemas); err != nil {
		return t, fmt.Errorf("bad tool definition: %w", err)
	}
	if t.Name == "" {
		return t, errors.New("tool without a name")
	}
	t.InputSchema = mcp.ToolInputSchema{}
	t.RawInputSchema = schemas.Input
	if len(t.RawInputSchema) == 0 {
		t.RawInputSchema = json.RawMessage(`{"type":"object"}`)
	}
	t.OutputSchema = mcp.ToolOutputSchema{}
	t.RawOutputSchema = nil
	if len(schemas.Output) > 0 && !bytes.Equal(schemas.Output, []byte("null")) {
		t.RawOutputSchema = schemas.Output
	}
	return t, nil
}

func (p *Proxy) filterList(_ context.Context, _ any, _ *mcp.ListToolsRequest, res *mcp.ListToolsResult) {
	if res == nil {
		return
	}
	p.toolsMu.Lock()
	offered := p.tools
	p.toolsMu.Unlock()
	g := p.cur.Load().gate
	kept := res.Tools[:0]
	for _, t := range res.Tools {
		if (g.Planned(t.Name) || p.cfg.Observe.All) && (offered == nil || offered[t.Name]) {
			kept = append(kept, t)
		}
	}
	res.Tools = kept
}

// limitsLine tells the model the plan's limits for a tool in one line.
func limitsLine(plan *hclplan.Plan, tool string) string {
	var parts []string
	for _, s := range plan.StepsForTool(tool) {
		parts = append(parts, stepSummary(plan, s))
	}
	return "[planlock] " + strings.Join(parts, " | ")
}

func stepSummary(plan *hclplan.Plan, s *hclplan.Step) string {
	var b strings.Builder
	fmt.Fprintf(&b, "step %q", s.Name)
	if plan.Order != hclplan.OrderAny {
		fmt.Fprintf(&b, " (%d of %d, in order)", s.Index+1, len(plan.Steps))
	}
	fmt.Fprintf(&b, ": max_calls %d", s.MaxCalls)
	if len(s.Args) == 0 {
		b.WriteString("; no arguments")
	}
	for _, a := range s.Args {
		b.WriteString("; ")
		b.WriteString(a.Name)
		if l := a.Limits(); l != "" {
			b.WriteString(" " + l)
		}
	}
	for _, c := range s.Checks {
		b.WriteString("; check: " + c.Limit())
	}
	if s.Approval == hclplan.ApprovalEach {
		b.WriteString("; each call needs human approval")
	}
	return b.String()
}

// relayNotification sends the upstream's progress to the call that asked for
// it, under the client's token, and its log messages to the one client they
// can belong to (routeLog).
// Other notifications (list changes of what is not exposed) are dropped.
func (p *Proxy) relayNotification(n mcp.JSONRPCNotification) {
	if p.relayExtra(n) {
		return
	}
	switch n.Method {
	case string(mcp.MethodNotificationProgress):
		tok, ok := n.Params.AdditionalFields["progressToken"]
		if !ok {
			return
		}
		p.progMu.Lock()
		route, ok := p.progs[fmt.Sprint(tok)]
		p.progMu.Unlock()
		if !ok {
			return
		}
		params := map[string]any{}
		for k, v := range n.Params.AdditionalFields {
			params[k] = v
		}
		params["progressToken"] = route.token
		// A call on the HTTP fast lane writes it on its own response, where
		// the server's forwarder would (httpfast.go).
		hc, lane := responderOf(route.ctx).(callNotifier)
		if lane && hc.notify(n.Method, params) || p.srv.SendNotificationToClient(route.ctx, n.Method, params) == nil {
			route.sent.Add(1)
			if sp := p.progressCounts(route.ctx); sp != nil {
				sp.queued.Add(1)
			}
		}
	case "notifications/message":
		params := map[string]any{}
		for k, v := range n.Params.AdditionalFields {
			params[k] = v
		}
		p.routeLog(n.Method, params)
	case string(mcp.MethodNotificationToolsListChanged):
		// The upstream's tools changed: read them again so schemas stay exact.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if tools, err := p.up.ListTools(ctx); err == nil {
				p.setTools(tools)
			}
		}()
	}
}

// progressFor registers a progress route when the client asked for progress;
// it returns the token to send upstream ("" when none) and the cleanup.
func (p *Proxy) progressFor(ctx context.Context, req mcp.CallToolRequest) (string, func()) {
	if req.Params.Meta == nil || req.Params.Meta.ProgressToken == nil {
		return "", func() {}
	}
	tok := fmt.Sprintf("planlock-%d", p.progN.Add(1))
	route := progressRoute{ctx: ctx, token: req.Params.Meta.ProgressToken, sent: new(atomic.Int64)}
	p.progMu.Lock()
	p.progs[tok] = route
	p.progMu.Unlock()
	return tok, func() {
		p.waitProgressWritten(ctx, route)
		p.progMu.Lock()
		delete(p.progs, tok)
		p.progMu.Unlock()
	}
}

// waitProgressWritten waits (a bounded time) until the progress queued for
// a call has reached its client, so that the answer does not overtake it
// (a client drops progress that comes after the answer). Over stdio the
// notifications written to the one output are counted. Over HTTP the
// responses of each session count what they write (countProgress): mcp-go's
// forwarders take a notification off the session's queue and then write it
// to the stream of whichever request of that session they serve (this
// call's, another call's, or the client's GET stream), and drop it if that
// request's answer was written in between, so only the written count is
// proof. The wait is bounded: a dropped notification is never written.
func (p *Proxy) waitProgressWritten(ctx context.Context, route progressRoute) {
	if route.sent.Load() == 0 {
		return
	}
	sp := p.progressCounts(ctx)
	if sp == nil {
		return
	}
	written, want := &sp.written, sp.queued.Load()
	deadline := time.Now().Add(progressWait)
	for written.Load() < want && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(200 * time.Microsecond)
	}
	// What was not written by now is taken as lost, so that later calls do
	// not wait for it too.
	for w := written.Load(); w < want && !written.CompareAndSwap(w, want); w = written.Load() {
	}
}

// sessionProgress counts, for one client (the stdio one or an HTTP session),
// the progress notifications queued for it and those written to it.
type sessionProgress struct{ queued, written atomic.Int64 }

// httpSession is a registered HTTP session: its progress counters, and the
// session itself, which the MCP server gives a request naming its ID (the
// HTTP fast lane's, httpfast.go).
type httpSession struct {
	prog sessionProgress
	sess server.ClientSession
}

// trackSession starts or stops keeping a session. Only registered sessions
// are kept, so a request naming an unknown session cannot grow the map.
func (p *Proxy) trackSession(s server.ClientSession, on bool) {
	id := s.SessionID()
	p.sessMu.Lock()
	defer p.sessMu.Unlock()
	if !on {
		delete(p.sessions, id)
		return
	}
	if p.sessions == nil {
		p.sessions = map[string]*httpSession{}
	}
	if hs := p.sessions[id]; hs != nil { // a GET stream registers a session again
		hs.sess = s
		return
	}
	p.sessions[id] = &httpSession{sess: s}
}

// registeredSession returns the session registered under id, or nil.
func (p *Proxy) registeredSession(id string) server.ClientSession {
	p.sessMu.Lock()
	defer p.sessMu.Unlock()
	if hs := p.sessions[id]; hs != nil {
		return hs.sess
	}
	return nil
}

// progressCounts returns the progress counters of the client a call came
// from: the stdio client's, or its HTTP session's; nil when not counted.
func (p *Proxy) progressCounts(ctx context.Context) *sessionProgress {
	if p.stdioProg != nil {
		return p.stdioProg
	}
	if s := server.ClientSessionFromContext(ctx); s != nil {
		return p.sessionProgress(s.SessionID())
	}
	return nil
}

// sessionProgress returns a registered session's counters, or nil.
func (p *Proxy) sessionProgress(id string) *sessionProgress {
	p.sessMu.Lock()
	defer p.sessMu.Unlock()
	if hs := p.sessions[id]; hs != nil {
		return &hs.prog
	}
	return nil
}

// progressWait bounds how long an answer waits for its progress to be written.
const progressWait = 500 * time.Millisecond

// progressCounter counts the progress notifications written to the client.
type progressCounter struct {
	w io.Writer
	n *atomic.Int64
}

var progressMethod = []byte(`"method":"notifications/progress"`)

func (c progressCounter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	if err == nil {
		c.n.Add(int64(bytes.Count(b, progressMethod)))
	}
	return n, err
}

// auditUnknownTool records a call of a tool that neither the plan nor the
// upstream has: the server answers it with a JSON-RPC error (there is no
// such tool to call), and the audit still shows the attempt.
func (p *Proxy) auditUnknownTool(ctx context.Context, _ any, method mcp.MCPMethod, message any, err error) {
	if method != mcp.MethodToolsCall || !errors.Is(err, server.ErrToolNotFound) {
		return
	}
	req, ok := message.(*mcp.CallToolRequest)
	if !ok {
		return
	}
	plan := p.cur.Load().plan
	call := ledger.Call{PlanDigest: plan.Digest, Caller: callerOf(ctx), Tool: req.Params.Name}
	if _, derr := wire.DecodeArgs(req.Params.RawArguments); derr == nil {
		call.Args = req.Params.RawArguments
	}
	reason := fmt.Sprintf("tool %q is not in plan %q (and the upstream does not offer it)", req.Params.Name, plan.Name)
	ctx, end := p.startCall(ctx, plan.Name, req.Params.Name, req.Params.RawArguments)
	defer end()
	note(ctx, "", OutcomeBlocked, "unplanned", 0)
	logStateError(p.cfg.Log, p.cfg.State.Block(context.WithoutCancel(ctx), call, reason))
}
