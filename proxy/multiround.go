package proxy

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/oneline"
	"github.com/planlock/planlock/proxy/ledger"
)

// Multi-round requests (protocol 2026-07-28). An upstream may answer a
// tools/call or prompts/get with a result that is not the call's outcome:
// resultType "input_required" (inputRequests the client is to run:
// elicitation, sampling, roots) or "task" (the tasks extension), and a
// client retries with inputResponses and requestState.
//
// Input requests are a channel from the upstream to the user and the
// model, so they are gated: a step's (or prompt's) input block
// (hclplan.InputRules) says which may reach the client. An input_required
// result whose requests all pass is relayed with planlock's own
// requestState (roundState, sealed by roundKeeper) in place of the
// upstream's; one that asks for anything the plan does not allow ends the
// call with an error outcome, and nothing of it reaches the client. The
// retry is taken only with a requestState planlock sealed, for the same
// caller, plan, step and arguments, before it expires, once; its
// inputResponses must answer what was asked within the plan's bounds. It
// goes to the upstream with the upstream's own requestState, counts no
// second time (the allow record of the first round counted the call), and
// its answers are recorded (an "input" record). The call's outcome is
// recorded once, when a round completes it. Tasks stay refused: any
// result type the gate does not relay ends the call with an error. Every
// upstream result planlock relays or reads passes through wire.RelayResult
// (tools) or wire.CheckResultType (reads, gets, completions, pin reads),
// whichever path the request took (server, stdio or HTTP fast lane).

// roundTripRefusal is the reason a client's request carrying a multi-round
// retry's fields is refused; "" when it carries none.
func roundTripRefusal(method string, rt mcp.MultiRoundTripParams) string {
	if rt.InputResponses == nil && rt.RequestState == "" {
		return ""
	}
	return method + " carries inputResponses or requestState, but planlock asked for no input (it relays no input request): the retry was not forwarded and not counted"
}

// isRetry reports whether a request carries a multi-round retry's fields.
func isRetry(rt mcp.MultiRoundTripParams) bool {
	return rt.InputResponses != nil || rt.RequestState != ""
}

// DefaultRoundTTL is how long a relayed input_required result may be
// answered.
const DefaultRoundTTL = 10 * time.Minute

// roundState is what planlock's requestState carries: the decision the
// first round was forwarded on (plan, step, the count's ticket), what the
// retry must match (method, name, arguments digest, caller), what was asked
// (so that the answers can be checked), and the upstream's own requestState.
type roundState struct {
	V      int                   `json:"v"`
	Nonce  string                `json:"n"`
	Exp    int64                 `json:"exp"` // unix seconds
	Method string                `json:"m"`   // tools/call or prompts/get
	Name   string                `json:"name"`
	Args   string                `json:"args"` // sha256 of the canonical arguments
	Caller string                `json:"caller,omitempty"`
	Plan   string                `json:"plan"`
	Step   string                `json:"step"`
	Index  int                   `json:"si"`
	Round  int                   `json:"round"` // input_required results so far
	Seq    uint64                `json:"seq"`   // the ticket of the call's allow record
	Used   int                   `json:"used"`
	At     int64                 `json:"at"` // unix nanoseconds of the reservation
	Up     string                `json:"up,omitempty"`
	Asked  map[string]askedInput `json:"asked"`
}

// askedInput is one input request as relayed: its method and params.
type askedInput struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

func (s roundState) ticket() ledger.Ticket {
	return ledger.Ticket{Seq: s.Seq, PlanDigest: s.Plan, Step: s.Step, StepIndex: s.Index, Tool: s.Method, Used: s.Used, At: time.Unix(0, s.At)}
}

// roundKeeper seals and opens requestStates and remembers the ones used.
// The key (Config.RoundKey) is derived from the state key when one is
// configured, so that every replica sharing a state opens what any of
// them sealed; else it is the state directory's own (cmd/planlock).
// Which were used is kept in memory, a first refusal without a write;
// the state's input record of each round is what makes a retry good once
// on every replica and across restarts (ledger.ErrRoundAnswered).
type roundKeeper struct {
	key []byte
	ttl time.Duration
	mu  sync.Mutex
	// used nonces and when they expire; swept as they pass
	used map[string]time.Time
}

func newRoundKeeper(key []byte, ttl time.Duration) *roundKeeper {
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
	}
	if ttl <= 0 {
		ttl = DefaultRoundTTL
	}
	return &roundKeeper{key: bytes.Clone(key), ttl: ttl, used: map[string]time.Time{}}
}

// statePrefix starts every requestState planlock seals.
const statePrefix = "planlock.1."

func (k *roundKeeper) mac(b []byte) []byte {
	m := hmac.New(sha256.New, k.key)
	m.Write([]byte("planlock request state\x00"))
	m.Write(b)
	return m.Sum(nil)
}

func (k *roundKeeper) seal(s roundState, now time.Time) (string, error) {
	var n [16]byte
	if _, err := rand.Read(n[:]); err != nil {
		return "", fmt.Errorf("request state nonce: %w", err)
	}
	s.V, s.Nonce, s.Exp = 1, base64.RawURLEncoding.EncodeToString(n[:]), now.Add(k.ttl).Unix()
	b, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	return statePrefix + base64.RawURLEncoding.EncodeToString(b) + "." + base64.RawURLEncoding.EncodeToString(k.mac(b)), nil
}

// open verifies a requestState and returns what it carries; the error says
// in one line why it is not one planlock sealed or is no longer good.
func (k *roundKeeper) open(s string, now time.Time) (roundState, error) {
	var st roundState
	body, ok := strings.CutPrefix(s, statePrefix)
	if !ok {
		return st, errors.New("the requestState is not one planlock issued")
	}
	b64, m64, ok := strings.Cut(body, ".")
	b, err1 := base64.RawURLEncoding.DecodeString(b64)
	m, err2 := base64.RawURLEncoding.DecodeString(m64)
	if !ok || err1 != nil || err2 != nil || !hmac.Equal(m, k.mac(b)) {
		return st, errors.New("the requestState does not verify (forged, altered, or sealed under another key)")
	}
	if err := json.Unmarshal(b, &st); err != nil || st.V != 1 {
		return st, errors.New("the requestState does not verify (unknown version)")
	}
	if now.Unix() > st.Exp {
		return st, fmt.Errorf("the requestState expired at %s", time.Unix(st.Exp, 0).UTC().Format(time.RFC3339))
	}
	return st, nil
}

// use marks a requestState's nonce used; false when it was before.
func (k *roundKeeper) use(st roundState, now time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for n, exp := range k.used {
		if now.Unix() > exp.Unix() {
			delete(k.used, n)
		}
	}
	if _, ok := k.used[st.Nonce]; ok {
		return false
	}
	k.used[st.Nonce] = time.Unix(st.Exp, 0)
	return true
}

// inputRequired is an input_required result read for the gate: its input
// requests as mcp-go reads them (and so as a client gets them), each also
// as JSON for the plan's check and the state, and the upstream's
// requestState.
type inputRequired struct {
	requests mcp.InputRequests
	asked    map[string]askedInput
	state    string
}

// readInputRequired reads an input_required result and checks every input
// request against rules; the error says which request the plan refuses
// and why.
func readInputRequired(res json.RawMessage, rules *hclplan.InputRules) (*inputRequired, error) {
	var r struct {
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  *string                    `json:"requestState"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, fmt.Errorf("the input_required result is not valid: %v", err)
	}
	if len(r.InputRequests) == 0 {
		return nil, errors.New("the input_required result asks for nothing")
	}
	out := &inputRequired{requests: mcp.InputRequests{}, asked: map[string]askedInput{}}
	if r.RequestState != nil {
		out.state = *r.RequestState
	}
	ids := make([]string, 0, len(r.InputRequests))
	for id := range r.InputRequests {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		var ir mcp.InputRequest
		if err := json.Unmarshal(r.InputRequests[id], &ir); err != nil {
			return nil, fmt.Errorf("input request %q: %s", oneline.Of(id, 60), oneline.Of(err.Error(), 200))
		}
		// What is checked is what is relayed: mcp-go's reading, encoded
		// again.
		b, err := json.Marshal(ir)
		if err != nil {
			return nil, fmt.Errorf("input request %q: %s", oneline.Of(id, 60), oneline.Of(err.Error(), 200))
		}
		var a askedInput
		if err := json.Unmarshal(b, &a); err != nil {
			return nil, fmt.Errorf("input request %q: %v", oneline.Of(id, 60), err)
		}
		if err := rules.CheckRequest(a.Method, a.Params); err != nil {
			return nil, fmt.Errorf("input request %q: %s", oneline.Of(id, 60), oneline.Of(err.Error(), 300))
		}
		out.requests[id], out.asked[id] = ir, a
	}
	return out, nil
}

// checkResponses checks a retry's inputResponses against what was asked
// and the plan's rules, and returns them as JSON for the upstream and the
// audit.
func checkResponses(responses mcp.InputResponses, asked map[string]askedInput, rules *hclplan.InputRules) (json.RawMessage, []string, error) {
	ids := make([]string, 0, len(responses))
	for id := range responses {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make(map[string]json.RawMessage, len(responses))
	for _, id := range ids {
		a, ok := asked[id]
		if !ok {
			return nil, nil, fmt.Errorf("inputResponses answers %q, which was not asked", oneline.Of(id, 60))
		}
		b, err := json.Marshal(responses[id])
		if err != nil {
			return nil, nil, fmt.Errorf("input response %q: %s", oneline.Of(id, 60), oneline.Of(err.Error(), 200))
		}
		if err := rules.CheckResponse(a.Method, a.Params, b); err != nil {
			return nil, nil, fmt.Errorf("input response %q: %s", oneline.Of(id, 60), oneline.Of(err.Error(), 300))
		}
		out[id] = b
	}
	b, err := json.Marshal(out)
	return b, ids, err
}

// argsDigest is the digest a requestState binds the arguments with.
func argsDigest(args json.RawMessage) string {
	d, err := ledger.ArgsDigest(args)
	if err != nil {
		return "invalid"
	}
	return d
}

// Input passes a multi-round call's answers on to the wrapped state.
func (o *orderState) Input(ctx context.Context, c ledger.Call, ref uint64, round int, what string) error {
	r, ok := o.State.(InputRecorder)
	if !ok {
		return errors.New("the state does not record the answers of multi-round calls")
	}
	return r.Input(ctx, c, ref, round, what)
}

// roundRefusal is the reason a retry is refused, and whether the call it
// retries has ended with it (its outcome recorded).
type roundRefusal struct{ reason string }

// openRetry verifies a retry of method name with arguments args: its
// requestState, that it belongs to this caller, plan and arguments, and its
// answers; it records the answers and returns the state and the answers to
// forward. Any failure is a one-line reason; nothing was forwarded.
func (p *Proxy) openRetry(ctx context.Context, plan *hclplan.Plan, method, name string, args json.RawMessage, rt mcp.MultiRoundTripParams,
	rules func(st roundState) *hclplan.InputRules) (roundState, json.RawMessage, *roundRefusal) {
	refuse := func(format string, a ...any) (roundState, json.RawMessage, *roundRefusal) {
		return roundState{}, nil, &roundRefusal{reason: fmt.Sprintf(method+" retry refused: "+format+"; it was not forwarded", a...)}
	}
	if rt.RequestState == "" {
		return refuse("it carries inputResponses without a requestState")
	}
	now := p.cfg.Now()
	st, err := p.rounds.open(rt.RequestState, now)
	if err != nil {
		return refuse("%s", err.Error())
	}
	switch {
	case plan.Expired(now):
		return refuse("%s", expiredReason(plan))
	case st.Method != method || st.Name != name:
		return refuse("the requestState is for %s %q", st.Method, oneline.Of(st.Name, 60))
	case st.Caller != callerOf(ctx):
		return refuse("the requestState was issued to another caller")
	case st.Plan != plan.Digest:
		return refuse("the requestState was issued under another plan (%s)", oneline.Of(st.Plan, 80))
	case st.Args != argsDigest(args):
		return refuse("the arguments differ from the call's first round (they must be unchanged)")
	}
	in := rules(st)
	if in == nil {
		kind := "step"
		switch mcp.MCPMethod(method) {
		case mcp.MethodPromptsGet:
			kind = "prompt"
		case mcp.MethodResourcesRead:
			kind = "resource"
		}
		return refuse("the plan's %s %q allows no input requests", kind, st.Step)
	}
	answers, ids, err := checkResponses(rt.InputResponses, st.Asked, in)
	if err != nil {
		return refuse("%s", err.Error())
	}
	if !p.rounds.use(st, now) {
		return refuse("the requestState was used already (a requestState is good for one retry)")
	}
	rec, ok := p.cfg.State.(InputRecorder)
	if !ok {
		return refuse("the state does not record the answers of multi-round calls")
	}
	c := ledger.Call{PlanDigest: plan.Digest, Step: st.Step, StepIndex: st.Index, Tool: method, Args: answers, Caller: callerOf(ctx)}
	if err := rec.Input(context.WithoutCancel(ctx), c, st.Seq, st.Round, "answers to "+strings.Join(ids, ", ")); errors.Is(err, ledger.ErrRoundAnswered) {
		// Used on another replica of a shared state, or before a restart.
		return refuse("the requestState was used already (a requestState is good for one retry)")
	} else if err != nil {
		// Fail closed: answers that cannot be recorded are not forwarded.
		return refuse("planlock could not record the answers: %s", stateError(err))
	}
	return st, answers, nil
}

// retryParams are the params of a retry as the upstream gets them: the
// call's own, with the checked answers and the upstream's requestState.
func retryParams(base map[string]any, st roundState, answers json.RawMessage) map[string]any {
	base["inputResponses"] = answers
	if st.Up != "" {
		base["requestState"] = st.Up
	}
	return base
}

// interim reads an input_required result of a call that may ask for input
// (rules not nil) for its next round: every input request the plan allows,
// within max_rounds. It returns what to relay (the requests, planlock's
// requestState) or why the call ends.
func (p *Proxy) interim(ctx context.Context, res json.RawMessage, rules *hclplan.InputRules, prev roundState) (mcp.InputRequests, string, error) {
	if prev.Round >= rules.MaxRounds {
		return nil, "", fmt.Errorf("the upstream asked for input again after %d round%s, the plan's max_rounds", prev.Round, map[bool]string{true: "", false: "s"}[prev.Round == 1])
	}
	ir, err := readInputRequired(res, rules)
	if err != nil {
		return nil, "", err
	}
	for _, id := range slices.Sorted(maps.Keys(ir.asked)) {
		if err := clientCanAnswer(ctx, ir.asked[id].Method); err != nil {
			return nil, "", fmt.Errorf("input request %q: %v", oneline.Of(id, 60), err)
		}
	}
	st := prev
	st.Round++
	st.Up, st.Asked = ir.state, ir.asked
	st.Caller = callerOf(ctx)
	sealed, err := p.rounds.seal(st, p.cfg.Now())
	if err != nil {
		return nil, "", err
	}
	return ir.requests, sealed, nil
}

// inputRefused is the message of a call ended by input requests the plan
// does not allow.
func inputRefused(why string) string {
	return "the upstream asked for input this plan does not allow (" + why + "): planlock relayed none of it, and the call ended"
}

// clientCanAnswer says why the client cannot be given an input request of
// method: a modern client must have declared the capability in this
// request's _meta; a legacy one gets the old server-to-client request
// (mcp-go's server sends it and retries the handler with the answer), so
// it must have declared it at initialize, on a session that can carry
// such requests (the HTTP front's, and planlock's stdio session: stdio.go).
func clientCanAnswer(ctx context.Context, method string) error {
	var caps *mcp.ClientCapabilities
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		caps = info.ClientCapabilities
	} else {
		sess := server.ClientSessionFromContext(ctx)
		var carries bool
		switch method {
		case hclplan.MethodElicitation:
			_, carries = sess.(server.SessionWithElicitation)
		case hclplan.MethodSampling:
			_, carries = sess.(server.SessionWithSampling)
		case hclplan.MethodRoots:
			_, carries = sess.(server.SessionWithRoots)
		}
		if !carries {
			return fmt.Errorf("the client's session cannot carry %s requests (a client of protocol %s over this front)", method, oneline.Of(server.RequestProtocolVersion(ctx), 40))
		}
		if ci, ok := sess.(server.SessionWithClientInfo); ok {
			c := ci.GetClientCapabilities()
			caps = &c
		}
	}
	declared := caps != nil
	if declared {
		switch method {
		case hclplan.MethodElicitation:
			declared = caps.Elicitation != nil
		case hclplan.MethodSampling:
			declared = caps.Sampling != nil
		case hclplan.MethodRoots:
			declared = caps.Roots != nil
		}
	}
	if !declared {
		return fmt.Errorf("the client did not declare the capability for %s", method)
	}
	return nil
}

type inputCapsKey struct{}

// withInputCapabilities is ctx carrying the client capabilities planlock
// declares to a modern upstream for one request of a step with input
// rules: what the plan allows and the client declared, nothing more (the
// upstream asks only for what it sees declared). A legacy upstream gets
// none: it would ask with server-to-client requests, which planlock
// refuses (upstream.go).
func withInputCapabilities(ctx context.Context, rules *hclplan.InputRules) context.Context {
	if rules == nil {
		return ctx
	}
	var client *mcp.ClientCapabilities
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		client = info.ClientCapabilities
	} else if ci, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
		c := ci.GetClientCapabilities()
		client = &c
	}
	caps := map[string]any{}
	if client != nil {
		if e := client.Elicitation; e != nil {
			el := map[string]any{}
			formOnly := e.Form == nil && e.URL == nil // {} is form mode
			if rules.Elicitation != nil && (e.Form != nil || formOnly) {
				el["form"] = struct{}{}
			}
			if rules.URL != nil && e.URL != nil {
				el["url"] = struct{}{}
			}
			if len(el) > 0 {
				caps["elicitation"] = el
			}
		}
		if rules.Sampling != nil && client.Sampling != nil {
			caps["sampling"] = struct{}{}
		}
		if rules.Roots && client.Roots != nil {
			caps["roots"] = struct{}{}
		}
	}
	b, _ := json.Marshal(caps)
	return context.WithValue(ctx, inputCapsKey{}, json.RawMessage(b))
}

// inputCapabilities is what withInputCapabilities put in ctx; nil means
// planlock's own (ourCapabilities).
func inputCapabilities(ctx context.Context) json.RawMessage {
	b, _ := ctx.Value(inputCapsKey{}).(json.RawMessage)
	return b
}

// hasInputRules reports whether any step or prompt of plan has an input
// block: then a dual-era upstream is spoken to in 2026-07-28, whose
// multi-round results the gate checks against them (upera.go).
func hasInputRules(plan *hclplan.Plan) bool {
	if plan == nil {
		return false
	}
	for _, s := range plan.Steps {
		if s.Input != nil {
			return true
		}
	}
	for _, pr := range plan.Prompts {
		if pr.Input != nil {
			return true
		}
	}
	for _, r := range plan.Resources {
		if r.Input != nil {
			return true
		}
	}
	return false
}
