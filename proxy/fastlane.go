package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/wire"
	"github.com/planlock/planlock/proxy/gate"
	"github.com/planlock/planlock/proxy/ledger"
)

// The stdio fast lane. A plain tools/call over stdio is decided on the
// goroutine that read it, sent upstream without waiting, and answered by
// the goroutine that reads the upstream's answer: no hand-off between
// goroutines, each of which costs about as much as the gate, the count and
// the audit record together on a busy machine. It takes the same road as
// every call (openCall → gate.Decide → act → run → forward) and answers
// what the MCP server would, in either protocol era (laneera.go).
//
// It takes every tools/call of a tool the server lists, in every
// configuration. Some it runs whole on a worker, as the server would
// (serveCall): every call when the proxy cannot wait on the reader (observe
// mode, an HTTP upstream, a state that waits on the network), a
// multi-round retry, and a call of a step with an input block, whose
// rounds may ask the client. Others, once decided, continue on a worker (a
// hold, a pin read, a hold consumed: they wait on the network; a call with
// a progress token, whose notifications come before its answer). What it
// leaves to the MCP server unchanged is what the server answers with an
// error of its own or runs as a task: a tool it does not list, a _meta it
// refuses, a number it cannot read, a task, an id that is neither a string
// nor a number or is in flight already. An id is answered as the server
// writes it back (wire.ServerID).

// answerLater is how a call forwarded without waiting is answered: one
// value per call, its steps methods (closures would cost an allocation
// each, on every call).
type answerLater struct {
	f        *fastLane
	id       json.RawMessage // as the client wrote it
	key      string          // id, as f.calls knows it
	tc       *toolCall       // nil until the call is opened
	modern   bool            // a request of protocol 2026-07-28 (laneera.go)
	answered atomic.Bool     // the client waits for exactly one answer
}

// answer answers the call, once whatever panics, after ending its
// observation: whoever reads the answer may look at the observer.
func (a *answerLater) answer(res *mcp.CallToolResult) {
	if a.answered.Swap(true) {
		return
	}
	defer a.f.w.writeResult(a.f.p, a.id, res, a.modern)
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(a.f.p.cfg.Log, "planlock proxy: panic ending a call's observation: %v\n", r)
		}
	}()
	if a.tc != nil { // a call run whole (serveCall) ends its own
		a.tc.end()
	}
}

// respond answers a call run whole: its result, or the handler's error as
// the server answers one.
func (a *answerLater) respond(res *mcp.CallToolResult, err error) {
	if err == nil {
		a.answer(res)
		return
	}
	if !a.answered.Swap(true) {
		a.f.w.writeError(a.id, err)
	}
}

// track registers cancel (the client's notifications/cancelled, the end of
// the session) until untrack; both run once per call.
func (a *answerLater) track(cancel func(cause string)) {
	f := a.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		go cancel(causeCancelled) // not under f.mu: cancel answers the call
		return
	}
	f.calls[a.key] = cancel
}

func (a *answerLater) untrack() {
	f := a.f
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.calls, a.key)
}

// fastLane is the fast lane of one stdio session.
type fastLane struct {
	p       *Proxy
	ctx     context.Context // the session's, with the MCP server's session in it
	w       *messageWriter
	offload func(job func()) bool // runs job on a worker; false once the session ends
	// direct: a call may be decided and sent on the reader's goroutine;
	// else every call runs whole on a worker.
	direct bool

	mu    sync.Mutex
	calls map[string]func(cause string) // client request id (raw JSON) → cancel
	done  bool                          // the session ended: nothing more is tracked
}

// fastLaneFor returns the session's fast lane (nil only when a test turns
// it off). Its calls wait on the reader only when nothing they wait for is
// remote: observe mode decides differently, an HTTP upstream has no send
// without waiting, and a state other than the local ledger may wait on the
// network for a count.
func (p *Proxy) fastLaneFor(ctx context.Context, w *messageWriter, offload func(func()) bool) *fastLane {
	if p.noFastLane {
		return nil
	}
	direct := !p.cfg.Observe.Enabled() && len(p.cfg.Upstream.Command) > 0 && localState(p.ostate.State)
	return &fastLane{p: p, ctx: ctx, w: w, offload: offload, direct: direct, calls: map[string]func(string){}}
}

// localState reports whether st counts and records on this machine alone
// (a local file write, at times an fdatasync), so that the reader's
// goroutine may wait for it.
func localState(st State) bool {
	switch st.(type) {
	case *ledger.Ledger:
		return true
	}
	_, ok := st.(localStater)
	return ok
}

// fastParams is a tools/call's params as the fast lane reads them; the
// fields it leaves to the MCP server mark a request it does not take.
type fastParams struct {
	Name           string          `json:"name"`
	Arguments      json.RawMessage `json:"arguments"`
	Meta           json.RawMessage `json:"_meta"`
	Task           json.RawMessage `json:"task"`
	InputResponses json.RawMessage `json:"inputResponses"`
	RequestState   json.RawMessage `json:"requestState"`
	// roundTrip is InputResponses and RequestState as the server decodes
	// them (laneParams).
	roundTrip mcp.MultiRoundTripParams
}

var fastParamNames = []string{"name", "arguments", "_meta", "task", "inputResponses", "requestState"}

// readFastParams reads a tools/call's params with wire.ScanMembers,
// or encoding/json when the text is not plain; the values are copies.
func readFastParams(params []byte) (fastParams, bool) {
	var vals [6][]byte
	if wire.ScanMembers(params, fastParamNames, vals[:]) {
		if name, ok := wire.PlainString(vals[0]); ok {
			cp := func(v []byte) json.RawMessage {
				if v == nil {
					return nil
				}
				return append(json.RawMessage(nil), v...)
			}
			return fastParams{Name: name, Arguments: cp(vals[1]), Meta: cp(vals[2]), Task: cp(vals[3]),
				InputResponses: cp(vals[4]), RequestState: cp(vals[5])}, true
		}
	}
	var ps fastParams
	return ps, json.Unmarshal(params, &ps) == nil
}

// laneParams reads a tools/call's params for a fast lane; false when the
// lane leaves the call to the MCP server: a task, a number the server
// would refuse, or a tool the server does not list (its own answer and
// audit for that). whole: a multi-round retry, or a call of a step with
// an input block, which runs whole on a worker (serveCall). _meta is read
// by readLaneEra.
func (p *Proxy) laneParams(params []byte) (ps fastParams, whole, ok bool) {
	ps, ok = readFastParams(params)
	if !ok || ps.Task != nil || !wire.FloatsFit(ps.Arguments) {
		return ps, false, false
	}
	names := p.callable.Load()
	if names == nil || !(*names)[ps.Name] {
		return ps, false, false
	}
	if ps.InputResponses != nil || ps.RequestState != nil {
		if ps.roundTrip, ok = readRoundTrip(ps); !ok {
			return ps, false, false // the server answers params it cannot read
		}
		return ps, true, true
	}
	return ps, asksInput(p.cur.Load().plan, ps.Name), true
}

// asksInput reports whether a step of tool may relay input requests: its
// calls may have rounds (multiround.go), and a legacy client is asked
// during the call (handleCall).
func asksInput(plan *hclplan.Plan, tool string) bool {
	for _, s := range plan.Steps {
		if s.Tool == tool && s.Input != nil {
			return true
		}
	}
	return false
}

// call takes a tools/call request (its id and params as the client wrote
// them) when it can; false leaves it, untouched, to the MCP server.
func (f *fastLane) call(id, params json.RawMessage) bool {
	id, ok := wire.ServerID(id) // the id the server would answer with
	if !ok {
		return false
	}
	ps, whole, ok := f.p.laneParams(params)
	if !ok {
		return false
	}
	era, ok := readLaneEra(ps.Meta)
	if !ok {
		return false
	}
	key := string(id)
	f.mu.Lock()
	_, busy := f.calls[key]
	full := len(f.calls) >= maxStdioRequests
	f.mu.Unlock()
	if busy || full {
		return false
	}
	f.p.fastTaken.Add(1)
	// id is the reader's buffer; the answer may come later.
	later := &answerLater{f: f, id: append(json.RawMessage(nil), id...), key: key, modern: era.modern()}
	req := mcp.CallToolRequest{}
	req.Method = string(mcp.MethodToolsCall)
	req.Params.Name = ps.Name
	req.Params.RawArguments = ps.Arguments
	req.Params.Meta = era.meta
	req.Params.MultiRoundTripParams = ps.roundTrip
	if whole || !f.direct {
		f.whole(later, era, req)
		return true
	}
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(f.p.cfg.Log, "planlock proxy: panic handling a client message: %v\n", r)
			if !later.answered.Swap(true) {
				f.w.write(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": later.id,
					"error": map[string]any{"code": mcp.INTERNAL_ERROR, "message": fmt.Sprintf("internal panic: %v", r)}})
			}
		}
	}()
	tc, res := f.p.openCall(f.p.eraContext(f.ctx, era), req)
	if tc == nil {
		later.answered.Store(true)
		f.w.writeResult(f.p, later.id, res, later.modern)
		return true
	}
	later.tc = tc
	for n := 1; ; n++ {
		d := tc.decide(f.p)
		if !fastDecision(d) || era.progress() || f.sharesDisk(tc, d) {
			// It waits on the network (or on a disk others could share,
			// or for its progress to be written): on a worker, as the
			// server would run it, cancelled by the client as the
			// server's would be.
			ctx, cancel := context.WithCancel(tc.ctx)
			tc.ctx = ctx
			later.track(func(string) { cancel() })
			if !f.offload(func() {
				defer later.untrack()
				defer cancel()
				// Ended before it is answered, as every call: whoever
				// reads the answer may look at the observer.
				later.answer(f.p.settle(tc, n, d))
			}) {
				later.untrack()
				cancel()
				tc.end()
			}
			return true
		}
		res, again := f.p.act(tc.ctx, tc.req, tc.st, tc.call, d, later)
		if again == nil {
			if res != nil {
				later.answer(res)
			}
			return true
		}
		if n == maxDecisions {
			later.answer(f.p.block(tc.ctx, tc.call, RuleStateChanged, again.reason))
			return true
		}
	}
}

// readRoundTrip reads a retry's inputResponses and requestState as the
// server's decode of the params does; false when it would fail.
func readRoundTrip(ps fastParams) (mcp.MultiRoundTripParams, bool) {
	var rt mcp.MultiRoundTripParams
	if ps.InputResponses != nil && json.Unmarshal(ps.InputResponses, &rt.InputResponses) != nil {
		return rt, false
	}
	if ps.RequestState != nil && json.Unmarshal(ps.RequestState, &rt.RequestState) != nil {
		return rt, false
	}
	return rt, true
}

// whole runs a call on a worker as the server's tool handler chain would
// (serveCall), cancelled by the client as the server's would be.
func (f *fastLane) whole(later *answerLater, era laneEra, req mcp.CallToolRequest) {
	ctx, cancel := context.WithCancel(f.p.eraContext(f.ctx, era))
	later.track(func(string) { cancel() })
	if !f.offload(func() {
		defer later.untrack()
		defer cancel()
		later.respond(f.p.serveCall(ctx, req))
	}) {
		later.untrack()
		cancel()
	}
}

// sharesDisk reports whether a forward should wait for its fdatasync on a
// worker: when other calls are in flight, so that they share one
// (group commit) rather than take turns at the disk on the reader. One call
// at a time waits on the reader, which is quicker than a hand-off.
func (f *fastLane) sharesDisk(tc *toolCall, d gate.Decision) bool {
	w, ok := f.p.ostate.State.(DiskWaiter)
	if !ok || d.Kind != gate.KindForward {
		return false
	}
	f.mu.Lock()
	busy := len(f.calls) > 0
	f.mu.Unlock()
	if !busy {
		return false
	}
	c := tc.call
	c.Step, c.StepIndex = d.Forward.Step.Name, d.Forward.Step.Index
	return w.WaitsForDisk(ledger.Reservation{Call: c, MaxCalls: d.Forward.Step.MaxCalls})
}

// fastDecision reports whether acting on d waits for nothing but the local
// state: a block, or a forward without a pin to read or a hold to consume.
func fastDecision(d gate.Decision) bool {
	switch d.Kind {
	case gate.KindBlock:
		return true
	case gate.KindForward:
		return !d.Forward.PinCheck && d.Forward.Hold == nil
	}
	return false
}

// cancel carries out a client's notifications/cancelled for a call in the
// fast lane; false when the request is not one of them (the MCP server's,
// or already answered).
func (f *fastLane) cancel(params json.RawMessage) bool {
	var ps struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &ps) != nil || len(ps.RequestID) == 0 {
		return false
	}
	key, ok := wire.ServerID(ps.RequestID) // as the call's id was kept
	if !ok {
		return false
	}
	f.mu.Lock()
	cancel, ok := f.calls[string(key)]
	f.mu.Unlock()
	if ok {
		cancel(causeCancelled)
	}
	return ok
}

// close ends the session's calls still waiting for the upstream, as the
// end of a request's context does for the MCP server's: each is recorded
// and answered as cancelled.
func (f *fastLane) close() {
	f.mu.Lock()
	f.done = true
	cancels := make([]func(string), 0, len(f.calls))
	for _, c := range f.calls {
		cancels = append(cancels, c)
	}
	f.mu.Unlock()
	for _, c := range cancels {
		c(causeCancelled)
	}
}

var _ laterAnswer = (*answerLater)(nil)
