package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/oneline"
	"github.com/planlock/planlock/proxy/ledger"
)

// A legacy upstream (protocol 2025-11-25 and before) asks for input during
// a call (a tools/call, resources/read or prompts/get) with server-to-client requests (elicitation/create,
// sampling/createMessage, roots/list), not with input_required results. The
// gate treats them as the modern era's input requests: one reaches the
// agent only while a forwarded call of a step whose input block allows it
// is in flight, within that block's bounds and max_rounds, and only a
// legacy client is asked (a client of 2026-07-28 cannot be asked mid-call);
// its answer is checked against what was asked and recorded (an "input"
// record) before it goes back. A refused request is answered with an error
// and ends the call: its result is an error whatever the upstream answers
// then. Which call a request belongs to: over HTTP the call whose POST
// carried it; else (over stdio, or on an HTTP GET stream), where a request
// names none, the one such call while it is the only request in flight to
// the upstream (with any other, every request is refused).

// askingCall is a forwarded call whose step has an input block, while it
// waits for the upstream's answer.
type askingCall struct {
	ctx   context.Context // the call's, with its client's session
	rules *hclplan.InputRules
	call  ledger.Call
	ref   uint64 // the allow record's seq

	mu      sync.Mutex
	rounds  int
	refused string // why an input request was refused ("" none)
}

type askingKey struct{}

// askingCalls are the asking calls in flight.
type askingCalls struct {
	mu    sync.Mutex
	calls map[*askingCall]bool
}

// start registers a call of a step with input rules until done runs; ctx
// carries it to the upstream transport (askingOf).
func (a *askingCalls) start(ctx context.Context, rules *hclplan.InputRules, call ledger.Call, ref uint64) (context.Context, *askingCall, func()) {
	ac := &askingCall{ctx: ctx, rules: rules, call: call, ref: ref}
	a.mu.Lock()
	if a.calls == nil {
		a.calls = map[*askingCall]bool{}
	}
	a.calls[ac] = true
	a.mu.Unlock()
	return context.WithValue(ctx, askingKey{}, ac), ac, func() {
		a.mu.Lock()
		delete(a.calls, ac)
		a.mu.Unlock()
	}
}

// sole is the one asking call in flight; nil when there is none or more.
func (a *askingCalls) sole() *askingCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.calls) != 1 {
		return nil
	}
	for ac := range a.calls {
		return ac
	}
	return nil
}

// refusedInput is why an input request of ctx's call was refused; "" when
// none was (or the call asks for none).
func refusedInput(ctx context.Context) string {
	ac, _ := ctx.Value(askingKey{}).(*askingCall)
	if ac == nil {
		return ""
	}
	ac.mu.Lock()
	defer ac.mu.Unlock()
	return ac.refused
}

// legacyCapabilities are the client capabilities planlock declares when it
// initialises a legacy upstream: what some input block of plan (a step's,
// a resource's, a prompt's) allows (a connection is shared by every call;
// each request is checked against its own call's block).
func legacyCapabilities(plan *hclplan.Plan) map[string]any {
	caps := map[string]any{}
	if plan == nil {
		return caps
	}
	el := map[string]any{}
	var blocks []*hclplan.InputRules
	for _, s := range plan.Steps {
		blocks = append(blocks, s.Input)
	}
	for _, r := range plan.Resources {
		blocks = append(blocks, r.Input)
	}
	for _, pr := range plan.Prompts {
		blocks = append(blocks, pr.Input)
	}
	for _, r := range blocks {
		if r == nil {
			continue
		}
		if r.Elicitation != nil {
			el["form"] = struct{}{}
		}
		if r.URL != nil {
			el["url"] = struct{}{}
		}
		if r.Sampling != nil {
			caps["sampling"] = struct{}{}
		}
		if r.Roots {
			caps["roots"] = map[string]any{}
		}
	}
	if len(el) > 0 {
		caps["elicitation"] = el
	}
	return caps
}

// answerUpstream answers a legacy upstream's server-to-client request: the
// client's answer when the gate lets it through, else an error (and the
// call it belongs to ends with an error).
func (p *Proxy) answerUpstream(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	ac, _ := ctx.Value(askingKey{}).(*askingCall)
	if ac == nil && p.up != nil && p.up.onlyRequest() {
		// Named by no stream (stdio, or an HTTP GET stream): it belongs
		// to the one asking call only when no other request, of a step
		// without an input block say, could have caused it.
		ac = p.asking.sole()
	}
	if ac == nil {
		return nil, fmt.Errorf("planlock proxy does not relay %s to the client: no call in flight may ask for input, or it cannot tell which of them asked", method)
	}
	res, err := p.askClient(ac, method, params)
	if err != nil {
		ac.mu.Lock()
		if ac.refused == "" {
			ac.refused = fmt.Sprintf("%s: %s", method, oneline.Of(err.Error(), 300))
		}
		ac.mu.Unlock()
		return nil, fmt.Errorf("planlock proxy refused %s: %s", method, oneline.Of(err.Error(), 300))
	}
	return res, nil
}

// askClient checks one request against the call's input block and asks
// the call's client, then checks and records the answer.
func (p *Proxy) askClient(ac *askingCall, method string, params json.RawMessage) (json.RawMessage, error) {
	ac.mu.Lock()
	if ac.refused != "" {
		ac.mu.Unlock()
		return nil, errors.New("an earlier input request of this call was refused")
	}
	ac.rounds++
	round := ac.rounds
	ac.mu.Unlock()
	if max := max(ac.rules.MaxRounds, 1); round > max {
		return nil, fmt.Errorf("more than max_rounds = %d input requests in one call", max)
	}
	if modernRequest(ac.ctx) {
		return nil, errors.New("the upstream asked with a request of the legacy era, which a client of protocol 2026-07-28 cannot be asked during a call")
	}
	var ir mcp.InputRequest
	b, err := json.Marshal(map[string]any{"method": method, "params": json.RawMessage(params)})
	if err == nil {
		err = json.Unmarshal(b, &ir)
	}
	if err != nil {
		return nil, fmt.Errorf("the request is not valid: %s", oneline.Of(err.Error(), 200))
	}
	// What is checked is what is relayed: mcp-go's reading, encoded again.
	var a askedInput
	if b, err = json.Marshal(ir); err == nil {
		err = json.Unmarshal(b, &a)
	}
	if err != nil {
		return nil, fmt.Errorf("the request is not valid: %s", oneline.Of(err.Error(), 200))
	}
	if err := ac.rules.CheckRequest(a.Method, a.Params); err != nil {
		return nil, err
	}
	if err := clientCanAnswer(ac.ctx, a.Method); err != nil {
		return nil, err
	}
	answers, err := p.fulfilLegacy(ac.ctx, mcp.InputRequests{"1": ir})
	if err != nil {
		return nil, err
	}
	answer, err := json.Marshal(answers["1"])
	if err != nil {
		return nil, err
	}
	if err := ac.rules.CheckResponse(a.Method, a.Params, answer); err != nil {
		return nil, fmt.Errorf("the client's answer: %s", oneline.Of(err.Error(), 300))
	}
	rec, ok := p.cfg.State.(InputRecorder)
	if !ok {
		return nil, errors.New("the state does not record the answers of multi-round calls")
	}
	c := ac.call
	c.Args = answer
	if err := rec.Input(context.WithoutCancel(ac.ctx), c, ac.ref, round, "answer to "+a.Method); err != nil {
		// Fail closed: an answer that cannot be recorded is not relayed.
		return nil, fmt.Errorf("planlock could not record the answer: %s", stateError(err))
	}
	return answer, nil
}
