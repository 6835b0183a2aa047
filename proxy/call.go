package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/canonjson"
	"github.com/planlock/planlock/internal/oneline"
	"github.com/planlock/planlock/internal/wire"
	"github.com/planlock/planlock/proxy/gate"
	"github.com/planlock/planlock/proxy/holdreq"
	"github.com/planlock/planlock/proxy/ledger"
)

// ledgerProgress lets the gate read the ledger's progress.
type ledgerProgress struct{ p *ledger.Progress }

func (l ledgerProgress) Current() int    { return l.p.Current }
func (l ledgerProgress) Done(i int) bool { return l.p.Done(i) }
func (l ledgerProgress) Calls(i int) int { return l.p.Calls(i) }

// maxDecisions bounds how often one call is decided again after the state
// it was decided on changed under it (a concurrent call took the count, an
// approval pull request turned out merged).
const maxDecisions = 3

// toolCall is one tools/call between its decode and its answer.
type toolCall struct {
	ctx  context.Context
	req  mcp.CallToolRequest
	st   *planState
	call ledger.Call
	args map[string]any
	end  func() // ends the call's observation (observer.go) once it is answered
}

// openCall decodes a tools/call once into what the gate needs. A call
// whose arguments are not one JSON object is blocked and answered at once:
// then the toolCall is nil and the answer is returned.
func (p *Proxy) openCall(ctx context.Context, req mcp.CallToolRequest) (*toolCall, *mcp.CallToolResult) {
	ctx, st := p.withPlan(ctx)
	tool := req.Params.Name
	raw := callArgs(req)
	ctx, end := p.startCall(ctx, st.plan.Name, tool, raw)
	end = p.trackLogAsk(ctx, end)
	call := ledger.Call{PlanDigest: st.plan.Digest, Caller: callerOf(ctx), Tool: tool, Args: raw}
	if why := roundTripRefusal("tools/call", req.Params.MultiRoundTripParams); why != "" {
		// Forwarded without them it would be a fresh call the client
		// did not mean; with them, an answer to a question the gate never
		// let through (multiround.go).
		res := p.block(ctx, call, RuleMultiRound, why)
		end()
		return nil, res
	}
	args, err := wire.DecodeArgs(raw)
	if err != nil {
		call.Args = nil
		res := p.block(ctx, call, string(gate.RuleArgs), fmt.Sprintf("tool %q: arguments must be a JSON object: %v", tool, err))
		end()
		return nil, res
	}
	return &toolCall{ctx: ctx, req: req, st: st, call: call, args: args, end: end}, nil
}

// callArgs is a call's arguments as the client wrote them; none is {}
// (contract).
func callArgs(req mcp.CallToolRequest) json.RawMessage {
	raw := bytes.TrimSpace(req.Params.RawArguments)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return []byte("{}")
	}
	return raw
}

// decide is gate.Decide on the call and the state as it is now.
func (tc *toolCall) decide(p *Proxy) gate.Decision {
	return tc.st.gate.Decide(p.decideInput(tc.st, tc.call, tc.args))
}

// handleCall is every tools/call, read top to bottom: decode once, decide
// (gate.Decide, no I/O), act on the decision (act). The only road to the
// upstream is act → run → forward. The stdio fast lane (fastlane.go) takes
// the same road without waiting for the upstream's answer.
func (p *Proxy) handleCall(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	res, err := p.callRound(ctx, req)
	// A legacy client knows no input_required result: the pipeline asks
	// it with the requests of its era and retries, as a read does
	// (fulfilLegacy), so that every front answers it a completed call.
	// max_rounds bounds the loop (interim).
	for err == nil && res != nil && res.ResultType == mcp.ResultTypeInputRequired && !modernRequest(ctx) {
		answers, ferr := p.fulfilLegacy(ctx, res.InputRequests)
		if ferr != nil {
			return p.unanswered(ctx, req, res.RequestState, ferr), nil
		}
		next := req
		next.Params.MultiRoundTripParams = mcp.MultiRoundTripParams{InputResponses: answers, RequestState: res.RequestState}
		res, err = p.retryCall(ctx, next)
	}
	return res, err
}

// callRound is one round of a tools/call: a first round, or a retry.
func (p *Proxy) callRound(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if isRetry(req.Params.MultiRoundTripParams) {
		return p.retryCall(ctx, req)
	}
	tc, res := p.openCall(ctx, req)
	if tc == nil {
		return res, nil
	}
	defer tc.end()
	return p.settle(tc, 1, tc.decide(p)), nil
}

// serveCall is a tools/call as the MCP server's tool handler chain runs
// it (recovery, the calls in flight for routeLog, handleCall), for the
// fronts that take a call themselves.
func (p *Proxy) serveCall(ctx context.Context, req mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("panic recovered in %s tool handler: %v", req.Params.Name, r)
		}
	}()
	res, err = p.inflight.middleware(p.handleCall)(ctx, req)
	if err == nil && res == nil {
		err = fmt.Errorf("tool '%s' handler returned no result", req.Params.Name)
	}
	return res, err
}

// settle acts on d, the call's nth decision, and while the state it was
// made on moved under it decides and acts again, at most maxDecisions times.
func (p *Proxy) settle(tc *toolCall, n int, d gate.Decision) *mcp.CallToolResult {
	for {
		res, again := p.act(tc.ctx, tc.req, tc.st, tc.call, d, nil)
		if again == nil {
			return res
		}
		if n == maxDecisions {
			return p.block(tc.ctx, tc.call, RuleStateChanged, again.reason)
		}
		n++
		d = tc.decide(p)
	}
}

// decideInput gathers what Decide looks at: the clock, the call, the plan's
// progress, the steps on hold and (looked up only when Decide asks) the
// hold bound to this exact call.
func (p *Proxy) decideInput(st *planState, call ledger.Call, args map[string]any) gate.Input {
	prog := p.cfg.State.Progress(call.PlanDigest)
	in := gate.Input{Now: p.cfg.Now(), Tool: call.Tool, Args: args, Progress: ledgerProgress{&prog},
		OnErrorHeld: st.heldWhy, ToolChanged: p.toolChanged(st.plan)}
	in.Hold = func() *gate.BoundHold {
		h, ok := p.holds().Bound(call)
		if !ok {
			return nil
		}
		b := &gate.BoundHold{ID: h.ID, State: gate.HoldState(h.State), Causes: holdCauses(h),
			StepIndex: h.StepIndex, Step: h.Step, ObservedPin: h.ObservedPin}
		// Only a numbered pull request can be reopened; a local hold
		// ("local", planlock holds reject) or a branch deleted without a
		// forge has none.
		if h.PR > 0 {
			b.PRURL = h.PRURL
		}
		return b
	}
	if p.cfg.Observe.All {
		st.shadow.input(&in) // observe mode: the would-be progress, no holds
	}
	return in
}

// holdCauses reads a hold's recorded causes; a hold from before causes were
// recorded lifts an approval only, or, when its reason says so, on_error.
func holdCauses(h ledger.Hold) gate.Causes {
	return gate.ParseCauses(h.Cause, strings.Contains(h.Reason, onErrorHeld))
}

// redecide says the state a decision was made on changed: decide again.
type redecide struct{ reason string }

// act carries out one decision. A non-nil redecide asks for a new decision
// (the result is then nil). With later set (the stdio fast lane, only for
// a block or a forward without pin check or hold) a forwarded call is
// answered through later, and act returns nil, nil.
func (p *Proxy) act(ctx context.Context, req mcp.CallToolRequest, st *planState, call ledger.Call, d gate.Decision, later laterAnswer) (*mcp.CallToolResult, *redecide) {
	if p.cfg.Observe.Enabled() && p.observes(d) {
		// Operator's observe mode (observe.go): audited, forwarded uncounted.
		return p.observe(ctx, req, st, call, d), nil
	}
	switch d.Kind {
	case gate.KindBlock:
		if d.Block.Step != nil {
			call.Step, call.StepIndex = d.Block.Step.Name, d.Block.Step.Index
		}
		return p.block(ctx, call, string(d.Block.Rule), d.Block.Reason), nil
	case gate.KindHold:
		return p.hold(ctx, st, call, d.Hold, nil)
	case gate.KindForward:
		return p.run(ctx, req, st, call, d.Forward, later)
	}
	return p.block(ctx, call, "internal", fmt.Sprintf("internal error: no decision for tool %q", call.Tool)), nil
}

// onErrorHeld marks the reason of a step held by on_error = "hold".
const onErrorHeld = "is on hold after a failed call"

func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(text)}, IsError: true}
}

// block records a blocked call and answers it; nothing reaches the upstream.
func (p *Proxy) block(ctx context.Context, call ledger.Call, rule, reason string) *mcp.CallToolResult {
	note(ctx, call.Step, OutcomeBlocked, rule, 0)
	logStateError(p.cfg.Log, p.cfg.State.Block(context.WithoutCancel(ctx), call, reason))
	return errorResult(fmt.Sprintf("blocked by plan %q: %s", p.current(ctx).plan.Name, reason))
}

// pinRead is one read of a step's pin.
type pinRead struct {
	value  string // the value read, as a hold records it ("" when the read failed)
	ok     bool   // the read succeeded
	reason string // "" when the value equals the plan's; else why the step holds
}

// hold records a hold for the call (or finds the same one again) through
// the hold keeper and answers at once. For a pinned step the pin is read
// first (unless pin already has the read): its value goes into the hold
// next to the plan's, and a mismatch adds the pin to what the approval
// must lift. When the keeper finds the hold approved (its pull request was
// merged), the call is decided again. A decision marked Rejected asks the
// keeper about that rejected hold again (rejectedAgain).
func (p *Proxy) hold(ctx context.Context, st *planState, call ledger.Call, d gate.Hold, pin *pinRead) (*mcp.CallToolResult, *redecide) {
	if d.Step != nil {
		call.Step, call.StepIndex = d.Step.Name, d.Step.Index
	}
	if d.Rejected != nil {
		return p.rejectedAgain(ctx, st, call, d)
	}
	if d.Step != nil {
		if d.Step.Pin != nil && pin == nil {
			r := p.readPin(ctx, d.Step)
			pin = &r
		}
	}
	spec := ledger.HoldSpec{Reason: d.Reason, Expires: p.cfg.Now().Add(p.cfg.HoldTTL)}
	causes := d.Causes
	if pin != nil {
		spec.ObservedPin = pin.value
		if pin.reason != "" && !causes.Has(gate.CausePin) {
			causes = append(slices.Clone(causes), gate.CausePin)
		}
	}
	spec.Cause = causes.String()
	var tc *holdreq.ToolChange
	if causes.Has(gate.ViolationCause(gate.RuleToolDefinition)) {
		tc = p.toolChange(st.plan, call.Tool)
	}
	a := p.holds().Request(ctx, st.plan.Name, call, spec, tc)
	switch a.outcome {
	case holdApproved:
		return nil, &redecide{reason: fmt.Sprintf("%s; the approval of this call could not be used now, repeat exactly the same call", d.Reason)}
	case holdRefused:
		return p.block(ctx, call, RuleHoldRefused, a.message), nil
	}
	note(ctx, call.Step, OutcomeHeld, causes.First(), 0)
	return errorResult(a.message), nil
}

// rejectedAgain asks the hold keeper about a rejected hold that has a pull
// request: a person may have reopened it, and then the keeper moves it to a
// new pending hold and the call waits for it again. The request is the
// rejected hold's own (its causes and pin value, which the reopened pull
// request shows), so the keeper finds that hold rather than opening a new
// one. Only approval pull requests can come back: with holds kept in the
// state alone, a rejected hold stays rejected.
func (p *Proxy) rejectedAgain(ctx context.Context, st *planState, call ledger.Call, d gate.Hold) (*mcp.CallToolResult, *redecide) {
	keeper, ok := p.holds().(prHolds)
	if !ok {
		return p.block(ctx, call, string(gate.RuleRejected), d.RejectedBlock().Reason), nil
	}
	// The hold as recorded (its cause exactly as stored), and still the one
	// the decision saw.
	h, ok := keeper.Bound(call)
	if !ok || h.ID != d.Rejected.ID || h.State != ledger.HoldRejected {
		return nil, &redecide{reason: fmt.Sprintf("%s; the hold of this call changed while it was decided, repeat exactly the same call", d.Reason)}
	}
	spec := ledger.HoldSpec{Reason: d.Reason, Cause: h.Cause, ObservedPin: h.ObservedPin, Expires: p.cfg.Now().Add(p.cfg.HoldTTL)}
	a := keeper.Request(ctx, st.plan.Name, call, spec, nil)
	switch a.outcome {
	case holdWaiting:
		note(ctx, call.Step, OutcomeHeld, string(gate.RuleRejected), 0)
		return errorResult(a.message), nil
	case holdRefused:
		return p.block(ctx, call, RuleHoldRefused, a.message), nil
	}
	// Approved cannot come of a rejected hold; fail closed.
	return p.block(ctx, call, string(gate.RuleRejected), d.RejectedBlock().Reason), nil
}

// readPin re-reads the pinned value through the upstream. The pin's tool
// and arguments come from the signed plan, never from the client.
func (p *Proxy) readPin(ctx context.Context, step *hclplan.Step) pinRead {
	pin := step.Pin
	cctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
	defer cancel()
	res, err := p.up.Request(cctx, "tools/call", map[string]any{"name": pin.Tool, "arguments": pin.Args})
	if err != nil {
		return pinRead{reason: fmt.Sprintf("step %q: pin read %s(%s) failed: %v", step.Name, pin.Tool, pin.Args.String(), oneline.Of(err.Error(), 300))}
	}
	doc, err := resultDocument(res)
	if err != nil {
		return pinRead{reason: fmt.Sprintf("step %q: pin read %s(%s) failed: %v", step.Name, pin.Tool, pin.Args.String(), err)}
	}
	got, ok := pin.Lookup(doc)
	if !ok {
		return pinRead{reason: fmt.Sprintf("step %q: pin field %q is missing from the result of %s", step.Name, pin.Field, pin.Tool)}
	}
	b, _ := canonjson.Marshal(got)
	r := pinRead{value: pinText(got, b), ok: true}
	if !pin.Eq.Equal(got) {
		r.reason = fmt.Sprintf("step %q: pin %s.%s = %s, want %s (it changed since the plan was approved)", step.Name, pin.Tool, pin.Field, b, pin.Eq.String())
	}
	return r
}

// resultDocument is the JSON document of a tool result that a pin reads:
// structuredContent when present, else the first text content parsed as JSON.
func resultDocument(raw json.RawMessage) (any, error) {
	// Only a complete result has a value to read (multiround.go).
	if err := wire.CheckResultType(raw); err != nil {
		return nil, err
	}
	var r struct {
		IsError    bool            `json:"isError"`
		Structured json.RawMessage `json:"structuredContent"`
		Content    []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("bad result: %w", err)
	}
	if r.IsError {
		msg := "tool error"
		if len(r.Content) > 0 {
			msg = oneline.Of(r.Content[0].Text, 300)
		}
		return nil, fmt.Errorf("the tool answered an error: %s", msg)
	}
	src := []byte(r.Structured)
	if len(src) == 0 || bytes.Equal(src, []byte("null")) {
		src = nil
		for _, c := range r.Content {
			if c.Type == "text" {
				src = []byte(c.Text)
				break
			}
		}
	}
	if src == nil {
		return nil, errors.New("the result has no JSON content")
	}
	doc, err := wire.DecodeDocument(src)
	if err != nil {
		return nil, fmt.Errorf("the result is not JSON read one way only: %w", err)
	}
	return doc, nil
}

// grant is a call that passed every check of its decision: its pin was
// read and matched (or its hold approved the value read), and its count is
// durable. Only run builds one, and forward, the one function that sends a
// client's tools/call upstream, needs one (act_test.go checks both).
//
// The one other kind is an observed grant, built only by observe in the
// operator's observe mode: the call was audited with what the plan would
// have decided and is forwarded uncounted (no ticket; step may be nil).
// shadow says the plan would have allowed it, so it moves observe mode's
// in-memory progress.
type grant struct {
	call     ledger.Call
	step     *hclplan.Step
	ticket   ledger.Ticket
	observed bool
	shadow   bool
	// round is the requestState a multi-round retry came with (the zero
	// value for a call's first round), answers its checked inputResponses.
	round   roundState
	answers json.RawMessage
}

// run carries out a Forward: read the pin if the step has one → reserve
// the count durably, consuming the hold if the decision runs under one →
// forward → record the outcome. With later set the answer comes through it
// (forward), and run returns nil, nil once the call is sent.
func (p *Proxy) run(ctx context.Context, req mcp.CallToolRequest, st *planState, call ledger.Call, d gate.Forward, later laterAnswer) (*mcp.CallToolResult, *redecide) {
	step := d.Step
	call.Step, call.StepIndex = step.Name, step.Index
	pinApproved := false
	if d.PinCheck {
		r := p.readPin(ctx, step)
		if r.reason != "" {
			if !r.ok || !d.PinAccepts(r.value) {
				return p.hold(ctx, st, call, d.PinHold(r.reason), &r)
			}
			pinApproved = true // the approver saw exactly this value
		}
	}
	if ok, why := p.up.Ready(); !ok {
		// Not counted: nothing was sent.
		note(ctx, call.Step, OutcomeNotSent, RuleUpstreamDown, 0)
		return errorResult(upstreamDown(why, "the call was not forwarded and not counted")), nil
	}
	rv := ledger.Reservation{Call: call, MaxCalls: step.MaxCalls}
	var lifted gate.Causes
	if d.Consumes(pinApproved) {
		rv.HoldID, lifted = d.Hold.ID, d.Lifts
		rv.OverLimit = lifted.Has(gate.ViolationCause(gate.RuleMaxCalls))
	}
	// The order and max_calls checks again, atomic with the count, except
	// what the consumed hold lifts.
	rv.Check = func(pr ledger.Progress) error {
		if f := st.gate.RecheckLifted(step, ledgerProgress{&pr}, lifted); f != nil {
			return f
		}
		return nil
	}
	t, err := p.cfg.State.Reserve(context.WithoutCancel(ctx), rv)
	if err != nil {
		var f *gate.Failure
		var ex *ledger.ExhaustedError
		switch {
		case errors.As(err, &f):
			return nil, &redecide{reason: f.Reason} // the progress moved: decide on the new one
		case errors.As(err, &ex):
			return nil, &redecide{reason: ex.Error()}
		case rv.HoldID != "" && errors.Is(err, ledger.ErrHoldState):
			// An identical call consumed the approval first.
			return nil, &redecide{reason: "the approval of this call was used by an identical call"}
		}
		// Fail closed: without a durable count there is no call.
		note(ctx, call.Step, OutcomeNotSent, RuleStateFailed, 0)
		return errorResult("planlock could not record the call, so it was not forwarded: " + stateError(err)), nil
	}
	g := grant{call: call, step: step, ticket: t}
	res := p.forward(ctx, req, st, g, later)
	if later == nil { // a call with later set consumes no hold (act)
		p.reportHoldRan(ctx, st, call, rv.HoldID, t.Seq, res)
	}
	return res, nil
}

// forward sends a granted call upstream and records the outcome. It is the
// only place a client's tools/call reaches the upstream. With later set
// (the stdio fast lane) it returns nil at once and the upstream reader's
// goroutine answers through later; the call timeout and the client's
// cancellation stop it (forwardedCall).
func (p *Proxy) forward(ctx context.Context, req mcp.CallToolRequest, st *planState, g grant, later laterAnswer) *mcp.CallToolResult {
	call := g.call
	start := time.Now()
	if later != nil {
		pc := &forwardedCall{}
		pc.finish = func(res json.RawMessage, err error, cause string) {
			// Before the answer: a call the answer prompts, with the same
			// id or beside it, finds none in flight (sharesDisk).
			later.untrack()
			defer func() {
				// On the upstream reader's goroutine: a panic here would
				// end the proxy, not one call.
				if r := recover(); r != nil {
					fmt.Fprintf(p.cfg.Log, "planlock proxy: panic finishing a call: %v\n", r)
					later.answer(errorResult(fmt.Sprintf("internal panic: %v; the call was counted and may or may not have run", r)))
				}
			}()
			r, after := p.forwarded(ctx, st, g, res, err, cause, time.Since(start), recordAfterAnswer)
			if after != nil {
				// The answer goes out first, then the outcome counts and
				// is recorded, whatever happens to the answer; decisions
				// wait for that meanwhile (orderState.holdForAnswer), so
				// the client's next call is decided on this outcome and
				// recorded after it.
				defer p.ostate.holdForAnswer()()
				defer after()
			}
			later.answer(r)
		}
		later.track(pc.cancel)
		pc.timer = time.AfterFunc(p.cfg.CallTimeout, func() { pc.cancel(causeTimeout) })
		stop, err := p.up.goAsking(requestedLogLevel(ctx), "tools/call", wire.ToolCallParams(call.Tool, call.Args), func(res json.RawMessage, err error) {
			defer pc.timer.Stop() // after the answer, as untrack
			pc.finish(res, err, "")
		})
		pc.sent(stop, err)
		return nil
	}
	ptok, done := p.progressFor(ctx, req)
	defer done()
	var params any = wire.ToolCallParams(call.Tool, call.Args)
	if ptok != "" || g.round.Method != "" {
		m := map[string]any{"name": call.Tool, "arguments": json.RawMessage(call.Args)}
		if ptok != "" {
			m["_meta"] = map[string]any{"progressToken": ptok}
		}
		if g.round.Method != "" {
			m = retryParams(m, g.round, g.answers) // a multi-round retry
		}
		params = m
	}
	var inputRules *hclplan.InputRules
	if !g.observed {
		inputRules = g.step.Input
	}
	if inputRules != nil {
		// A legacy upstream asks during the call (legacyask.go).
		var doneAsking func()
		ctx, _, doneAsking = p.asking.start(ctx, inputRules, call, g.ticket.Seq)
		defer doneAsking()
	}
	cctx, cancel := context.WithTimeout(withInputCapabilities(ctx, inputRules), p.cfg.CallTimeout)
	res, err := p.up.Request(cctx, "tools/call", params)
	cause := ""
	switch {
	case err == nil:
	case errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		cause = causeTimeout
	case ctx.Err() != nil:
		cause = causeCancelled
	}
	cancel()
	// A transport that runs work after its answer (the HTTP fast lane)
	// answers before the outcome record is written, as the stdio lane's
	// calls do.
	rsp, answerFirst := responderOf(ctx).(afterAnswerer)
	timing := recordBeforeAnswer
	if answerFirst {
		timing = recordWrittenAfter
	}
	r, write := p.forwarded(ctx, st, g, res, err, cause, time.Since(start), timing)
	if write != nil {
		rsp.afterAnswer(write) // only recordWrittenAfter leaves one
	}
	return r
}

// The call pipeline (open → decide → act → run → forward → record) names
// no transport: a transport reaches it only through these.

// laterAnswer answers a call forwarded without waiting for the upstream
// (the stdio fast lane): the upstream reader's goroutine answers through
// it. nil: the caller waits for forward's result.
type laterAnswer interface {
	answer(*mcp.CallToolResult)      // once, whatever panics
	track(cancel func(cause string)) // the client's cancellation, until untrack
	untrack()
}

// responder is a transport's handle on one call's response, carried in
// the call's context (withResponder): it may take notifications for the
// call (callNotifier) and run work after the answer (afterAnswerer).
type responder any

// afterAnswerer runs f once the call's answer is on its way.
type afterAnswerer interface{ afterAnswer(f func()) }

// callNotifier writes a notification on the call's own response; false
// when it cannot (answered, or not a stream), and the notification takes
// the server's route.
type callNotifier interface {
	notify(method string, params map[string]any) bool
}

type responderKey struct{}

func withResponder(ctx context.Context, r responder) context.Context {
	return context.WithValue(ctx, responderKey{}, r)
}

// responderOf is the responder of ctx's call; nil when its transport gave
// none (mcp-go's server answers it).
func responderOf(ctx context.Context) responder { return ctx.Value(responderKey{}) }

// Why a forwarded call ended without the upstream's answer.
const (
	causeTimeout   = "timeout"
	causeCancelled = "cancelled"
)

// recordTiming is when a forwarded call's successful outcome counts and is
// recorded, relative to the client's answer. Work between the upstream's
// answer and the client's is on the path of every call; a failure is
// recorded before the answer whatever the timing says.
type recordTiming int

const (
	// recordBeforeAnswer: counted and recorded before forwarded returns.
	recordBeforeAnswer recordTiming = iota
	// recordWrittenAfter: counted before forwarded returns (the step is
	// done for the client's next call), its record written by the
	// returned func, which the caller runs once it has answered.
	recordWrittenAfter
	// recordAfterAnswer: counted and recorded by the returned func, which
	// the caller runs once it has answered, holding decisions back until
	// it returns (orderState.holdForAnswer).
	recordAfterAnswer
)

// forwarded records the outcome of a forwarded call (the upstream's raw
// result, or err and its cause), as timing says, and returns the client's
// answer and what the caller runs after answering (nil: nothing).
func (p *Proxy) forwarded(ctx context.Context, st *planState, g grant, res json.RawMessage, err error, cause string, lat time.Duration, timing recordTiming) (_ *mcp.CallToolResult, after func()) {
	call, step, t := g.call, g.step, g.ticket
	var result *mcp.CallToolResult
	var outcome ledger.Outcome
	answered := false // the upstream answered a tool result (a tool error included)
	switch why := refusedInput(ctx); {
	case why != "":
		// A legacy upstream asked for input the plan refuses: the call
		// ends here, whatever the upstream answered after the refusal.
		msg := inputRefused(why)
		outcome = ledger.Outcome{OK: false, Err: msg, Latency: lat}
		result = errorResult(fmt.Sprintf("%s; the call was counted (step %q, %d of max_calls %d)", msg, step.Name, t.Used, step.MaxCalls))
	case err != nil:
		msg := ""
		switch cause {
		case causeTimeout:
			msg = fmt.Sprintf("upstream did not answer within %s", p.cfg.CallTimeout)
		case causeCancelled:
			msg = "cancelled by the client"
		default:
			msg = oneline.Of(err.Error(), 300)
		}
		outcome = ledger.Outcome{OK: false, Err: msg, Latency: lat}
		switch {
		case IsNotSent(err) && cause == "":
			// Counted before the write found the upstream gone: say
			// exactly that, here and in the audit.
			msg = "upstream unavailable: " + oneline.Of(notSentWhy(err), 200)
			outcome.Err = "not sent to the upstream: " + oneline.Of(notSentWhy(err), 200)
			if g.observed {
				result = errorResult(msg + "; the call was not run")
			} else {
				result = errorResult(fmt.Sprintf("%s; the call was not run, but it was counted (step %q, %d of max_calls %d)", msg, step.Name, t.Used, step.MaxCalls))
			}
		case g.observed:
			result = errorResult(msg + "; the call may or may not have run")
		default:
			result = errorResult(fmt.Sprintf("%s; the call was counted (step %q, %d of max_calls %d) and may or may not have run", msg, step.Name, t.Used, step.MaxCalls))
		}
	default:
		r, perr := wire.RelayResult(res)
		var un *wire.UnrelayedResult
		switch {
		case errors.As(perr, &un) && un.ResultType == string(mcp.ResultTypeInputRequired) && !g.observed && step.Input != nil:
			// A round of a multi-round call: relayed when the plan allows
			// every input request, and not yet an outcome; else the call
			// ends here.
			reqs, state, ierr := p.interim(ctx, res, step.Input, g.roundBase())
			if ierr == nil {
				note(ctx, step.Name, OutcomeForwarded, RuleMultiRound, lat)
				return &mcp.CallToolResult{Result: mcp.Result{ResultType: mcp.ResultTypeInputRequired},
					MultiRoundTripResult: mcp.MultiRoundTripResult{InputRequests: reqs, RequestState: state}}, nil
			}
			msg := inputRefused(oneline.Of(ierr.Error(), 300))
			outcome = ledger.Outcome{OK: false, Err: msg, Latency: lat}
			result = errorResult(fmt.Sprintf("%s; the call was counted (step %q, %d of max_calls %d)", msg, step.Name, t.Used, step.MaxCalls))
		case errors.As(perr, &un):
			// Forwarded and counted, but not a completed call: an error
			// outcome, and the client sees none of what the upstream asked.
			msg := un.Error()
			outcome = ledger.Outcome{OK: false, Err: msg, Latency: lat}
			if g.observed {
				result = errorResult(msg)
			} else {
				result = errorResult(fmt.Sprintf("%s; the call was counted (step %q, %d of max_calls %d)", msg, step.Name, t.Used, step.MaxCalls))
			}
		case perr != nil:
			msg := "upstream answered an invalid tool result: " + oneline.Of(perr.Error(), 300)
			outcome = ledger.Outcome{OK: false, Err: msg, Latency: lat}
			result = errorResult(msg)
		default:
			result, answered = r, true
			outcome = ledger.Outcome{OK: !r.IsError, Latency: lat}
			if r.IsError {
				outcome.Err = "tool error: " + firstText(r)
			}
		}
	}
	stepName := call.Step // an observed call of a tool outside the plan has no step
	if step != nil {
		stepName = step.Name
	}
	switch {
	case g.observed:
		note(ctx, stepName, OutcomeObserved, "", lat)
	case answered:
		note(ctx, stepName, OutcomeForwarded, "", lat)
	default:
		note(ctx, stepName, OutcomeFailed, "", lat)
	}
	if g.observed {
		if g.shadow {
			st.shadow.record(step, outcome)
		}
		return result, nil
	}
	if !outcome.OK || timing == recordBeforeAnswer {
		p.record(ctx, st, g.call, g.step, g.ticket, outcome)
		return result, nil
	}
	if timing == recordAfterAnswer {
		return result, func() { p.record(ctx, st, g.call, g.step, g.ticket, outcome) }
	}
	write, aerr := p.ostate.CompleteLater(context.WithoutCancel(ctx), t, outcome)
	logStateError(p.cfg.Log, aerr)
	st.setHeld(step.Index, "") // an approved call went through
	return result, write
}

// record counts and records the outcome of a call counted under ticket t; a failure of a
// step with on_error = "hold" puts the step on hold.
func (p *Proxy) record(ctx context.Context, st *planState, call ledger.Call, step *hclplan.Step, t ledger.Ticket, outcome ledger.Outcome) {
	logStateError(p.cfg.Log, p.cfg.State.Complete(context.WithoutCancel(ctx), t, outcome))
	if !outcome.OK && step.OnError == hclplan.ErrorHold {
		reason := fmt.Sprintf("step %q %s (%s)", step.Name, onErrorHeld, outcome.Err)
		st.setHeld(step.Index, reason)
		// The failed call's own hold keeps the step on hold across restarts;
		// approving it lets exactly that call run once more.
		spec := ledger.HoldSpec{Reason: reason, Cause: string(gate.CauseOnError), Expires: p.cfg.Now().Add(p.cfg.HoldTTL)}
		_, err := p.cfg.State.NewHold(context.WithoutCancel(ctx), call, spec)
		logStateError(p.cfg.Log, err)
	} else if outcome.OK {
		st.setHeld(step.Index, "") // an approved call went through
	}
}

func firstText(r *mcp.CallToolResult) string {
	for _, c := range r.Content {
		if t, ok := wire.ContentText(c); ok {
			return oneline.Of(t, 300)
		}
	}
	return "(no text)"
}

// roundBase is the requestState of the call's next round before its input
// requests: the one it came with, or for a first round what binds the
// retry to this decision.
func (g grant) roundBase() roundState {
	if g.round.Method != "" {
		return g.round
	}
	return roundState{Method: string(mcp.MethodToolsCall), Name: g.call.Tool, Args: argsDigest(g.call.Args), Caller: g.call.Caller,
		Plan: g.call.PlanDigest, Step: g.step.Name, Index: g.step.Index, Seq: g.ticket.Seq, Used: g.ticket.Used, At: g.ticket.At.UnixNano()}
}

// retryCall is a tools/call carrying a multi-round retry's fields: its
// requestState and answers verified (openRetry), it goes to the upstream
// under the decision of its first round, counted no second time, and its
// result is read as any forwarded call's (another round, or the outcome).
// A refused retry is a JSON-RPC error (as the protocol asks of a state that
// fails its integrity check), recorded as a block.
func (p *Proxy) retryCall(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctx, st := p.withPlan(ctx)
	tool := req.Params.Name
	raw := callArgs(req)
	ctx, end := p.startCall(ctx, st.plan.Name, tool, raw)
	defer p.trackLogAsk(ctx, end)()
	call := ledger.Call{PlanDigest: st.plan.Digest, Caller: callerOf(ctx), Tool: tool, Args: raw}
	if _, err := wire.DecodeArgs(raw); err != nil {
		call.Args = nil
		return p.block(ctx, call, string(gate.RuleArgs), fmt.Sprintf("tool %q: arguments must be a JSON object: %v", tool, err)), nil
	}
	plan := st.plan
	rs, answers, refused := p.openRetry(ctx, plan, string(mcp.MethodToolsCall), tool, raw, req.Params.MultiRoundTripParams,
		func(rs roundState) *hclplan.InputRules {
			if rs.Index >= 0 && rs.Index < len(plan.Steps) && plan.Steps[rs.Index].Name == rs.Step && plan.Steps[rs.Index].Tool == tool {
				return plan.Steps[rs.Index].Input
			}
			return nil
		})
	if refused != nil {
		return nil, &BlockedError{Reason: firstText(p.block(ctx, call, RuleMultiRound, refused.reason))}
	}
	step := plan.Steps[rs.Index]
	call.Step, call.StepIndex = step.Name, step.Index
	// The grant of the first round's decision and count, which openRetry
	// verified: forwarded, not counted again.
	g := grant{call: call, step: step, ticket: rs.ticket(), round: rs, answers: answers}
	if ok, why := p.up.Ready(); !ok {
		// The call was counted in its first round; it ends here.
		msg := upstreamDown(why, "the retry was not forwarded")
		p.record(ctx, st, g.call, g.step, g.ticket, ledger.Outcome{OK: false, Err: msg})
		note(ctx, step.Name, OutcomeNotSent, RuleUpstreamDown, 0)
		return errorResult(msg), nil
	}
	return p.forward(ctx, req, st, g, nil), nil
}

// unanswered ends a legacy client's multi-round call whose input request
// the client did not answer (why): counted in its first round, it is
// recorded as failed, and its requestState is spent.
func (p *Proxy) unanswered(ctx context.Context, req mcp.CallToolRequest, state string, why error) *mcp.CallToolResult {
	msg := oneline.Of(why.Error(), 300) + "; the call ended"
	ctx, st := p.withPlan(ctx)
	now := p.cfg.Now()
	rs, err := p.rounds.open(state, now)
	if err != nil || rs.Plan != st.plan.Digest || rs.Index < 0 || rs.Index >= len(st.plan.Steps) || !p.rounds.use(rs, now) {
		// Sealed by this proxy a moment ago: not expected.
		return errorResult(msg)
	}
	step := st.plan.Steps[rs.Index]
	raw := callArgs(req)
	call := ledger.Call{PlanDigest: rs.Plan, Step: step.Name, StepIndex: step.Index, Caller: rs.Caller, Tool: rs.Name, Args: raw}
	p.record(ctx, st, call, step, rs.ticket(), ledger.Outcome{OK: false, Err: msg})
	note(ctx, step.Name, OutcomeFailed, RuleMultiRound, 0)
	return errorResult(fmt.Sprintf("%s, counted (step %q, %d of max_calls %d)", msg, step.Name, rs.Used, step.MaxCalls))
}
