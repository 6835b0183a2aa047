package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/oneline"
	"github.com/planlock/planlock/internal/wire"
	"github.com/planlock/planlock/proxy/gate"
	"github.com/planlock/planlock/proxy/ledger"
)

// Resources and prompts (plan language v2). They are served only when the
// plan the proxy starts with has resource or prompt blocks; otherwise the
// proxy announces neither and answers their methods "method not found".
//
// Every upstream resource, template and prompt is registered with mcp-go
// (so that a read of an unplanned one reaches the check and the audit), and
// the lists are filtered by the current plan in the after-list hooks, as
// tools are. A catch-all template sends every other URI to the same check.
//
// Reads, gets, completions and subscriptions are decided by the gate
// (gate.DecideOp, through decideOp); reads and gets are counted in the
// ledger like tool calls, per (kind, name) of their block (gate.Counter,
// kept past the plan's steps). They do not take part in the sequential
// order: orderState keeps them from moving the current step.

// sendFunc sends one request on an upstream connection.
type sendFunc func(ctx context.Context, method string, params any) (json.RawMessage, error)

// upstreamCaps is what the upstream announced in initialize that the proxy
// relays.
type upstreamCaps struct {
	Resources, Subscribe, Prompts, Completions bool
	// Modern: the upstream speaks 2026-07-28, where a subscription is
	// part of planlock's listen stream (uplisten.go), not an RPC.
	Modern bool
}

func parseCaps(raw json.RawMessage) upstreamCaps {
	var c struct {
		Resources *struct {
			Subscribe bool `json:"subscribe"`
		} `json:"resources"`
		Prompts     json.RawMessage `json:"prompts"`
		Completions json.RawMessage `json:"completions"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &c) != nil {
		return upstreamCaps{}
	}
	present := func(r json.RawMessage) bool { return len(r) > 0 && string(r) != "null" }
	return upstreamCaps{Resources: c.Resources != nil, Subscribe: c.Resources != nil && c.Resources.Subscribe,
		Prompts: present(c.Prompts), Completions: present(c.Completions)}
}

// catchAllTemplate matches every URI the upstream did not list, so that its
// read reaches readResource (and is blocked or allowed there).
const catchAllTemplate = "{+uri}"

// extras is the proxy's resources and prompts state.
type extras struct {
	resources, prompts bool // served (fixed by the plan the proxy starts with)

	capsOnce sync.Once // capabilities are decided once, before any client is served

	subMu sync.Mutex
	subs  map[string]map[string]bool // URI → session IDs (or listen keys) subscribed
	// Open subscriptions/listen streams with resource subscriptions.
	listens map[listenKey]*listenSub

	subscribe atomic.Bool // resources.subscribe was announced (the upstream has it)
}

// listenKey names one subscriptions/listen stream: its session and the
// JSON-RPC id of its request.
type listenKey struct {
	session server.ClientSession
	id      string
}

// listenSub is a listen stream's resource subscriptions.
type listenSub struct {
	session server.ClientSession
	id      any    // the listen request's id, which tags what the stream carries
	key     string // its entry in extras.subs
	uris    map[string]bool
}

// setupExtras configures the server for the plan's resources and prompts.
func (p *Proxy) setupExtras(hooks *server.Hooks) {
	plan := p.cfg.Plan
	p.ex.resources, p.ex.prompts = len(plan.Resources) > 0, len(plan.Prompts) > 0
	p.ex.subs = map[string]map[string]bool{}
	p.ex.listens = map[listenKey]*listenSub{}
	if p.ex.resources || p.ex.prompts {
		// Without either it would decode every request to let each pass:
		// mcp-go answers their methods as not found.
		hooks.AddOnRequestInitialization(p.precheckRequest)
	}
	hooks.AddOnError(p.auditUnknownExtra)
	// Before mcp-go subscribes and acknowledges: whatever the plan says.
	hooks.AddBeforeSubscriptionsListen(p.filterListen)
	hooks.AddAfterSubscriptionsListen(func(ctx context.Context, id any, _ *mcp.SubscriptionsListenRequest, _ *mcp.SubscriptionsListenResult) {
		p.endListen(ctx, id)
	})
	hooks.AddOnError(func(ctx context.Context, id any, method mcp.MCPMethod, _ any, _ error) {
		if method == mcp.MethodSubscriptionsListen {
			p.endListen(ctx, id)
		}
	})
	if p.ex.resources {
		hooks.AddBeforeReadResource(beforeRead)
		hooks.AddAfterReadResource(afterRead)
		hooks.AddAfterListResources(p.filterResources)
		hooks.AddAfterListResourceTemplates(p.filterTemplates)
		hooks.AddOnUnregisterSession(func(_ context.Context, s server.ClientSession) { p.dropSubscriptions(s.SessionID()) })
	}
	if p.ex.prompts {
		hooks.AddAfterListPrompts(p.filterPrompts)
	}
}

// initExtras registers what is known before the upstream answers: the
// catch-all template and the plan's prompts, so that a read or get gets a
// clear "upstream unavailable" and is audited.
func (p *Proxy) initExtras() {
	if p.ex.resources {
		p.refreshResources(context.Background(), nil, false)
	}
	if p.ex.prompts {
		p.refreshPrompts(context.Background(), nil, false)
	}
}

// announceExtras sets the capabilities once: from the upstream's first
// initialisation when it succeeds, else (start calls it with ok false) with
// no subscribe and no completions. listChanged is always announced: the
// proxy's lists change with plan reloads whatever the upstream does. Once
// orders the writes before any client is served (start waits for it).
func (p *Proxy) announceExtras(caps upstreamCaps, ok bool) {
	p.ex.capsOnce.Do(func() {
		if p.ex.resources {
			server.WithResourceCapabilities(ok && caps.Subscribe, true)(p.srv)
			p.ex.subscribe.Store(ok && caps.Subscribe)
		}
		if p.ex.prompts {
			server.WithPromptCapabilities(true)(p.srv)
		}
		if ok && caps.Completions && (p.ex.resources || p.ex.prompts) {
			server.WithCompletions()(p.srv)
			server.WithPromptCompletionProvider(promptCompleter{p})(p.srv)
			server.WithResourceCompletionProvider(resourceCompleter{p})(p.srv)
		}
	})
}

// onConnect reads the upstream's resources and prompts on each new
// connection and subscribes again to what clients are subscribed to.
func (p *Proxy) onConnect(ctx context.Context, send sendFunc, caps upstreamCaps) {
	p.announceExtras(caps, true)
	if p.ex.resources {
		p.refreshResources(ctx, send, caps.Resources)
		p.ex.subMu.Lock()
		uris := make([]string, 0, len(p.ex.subs))
		for u := range p.ex.subs {
			uris = append(uris, u)
		}
		p.ex.subMu.Unlock()
		for _, u := range uris {
			if caps.Modern {
				break // the new connection's listen stream has them (Upstream.connect)
			}
			if _, err := send(ctx, "resources/subscribe", map[string]any{"uri": u}); err != nil {
				fmt.Fprintf(p.cfg.Log, "planlock proxy: subscribe again to %s: %v\n", u, err)
			}
		}
	}
	if p.ex.prompts {
		p.refreshPrompts(ctx, send, caps.Prompts)
	}
}

// listAll reads a paginated list raw.
func listAll(ctx context.Context, send sendFunc, method, key string) ([]json.RawMessage, error) {
	var all []json.RawMessage
	params := map[string]any{}
	for page := 0; ; page++ {
		if page > 1000 {
			return nil, fmt.Errorf("%s: more than 1000 pages", method)
		}
		res, err := send(ctx, method, params)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		var r map[string]json.RawMessage
		if err := json.Unmarshal(res, &r); err != nil {
			return nil, fmt.Errorf("%s: bad result: %w", method, err)
		}
		var items []json.RawMessage
		if err := json.Unmarshal(r[key], &items); err != nil && len(r[key]) > 0 {
			return nil, fmt.Errorf("%s: bad %s: %w", method, key, err)
		}
		all = append(all, items...)
		var next string
		_ = json.Unmarshal(r["nextCursor"], &next)
		if next == "" {
			return all, nil
		}
		params = map[string]any{"cursor": next}
	}
}

// refreshResources registers the upstream's resources and templates (all of
// them; the lists are filtered by the plan) and the catch-all template.
func (p *Proxy) refreshResources(ctx context.Context, send sendFunc, has bool) {
	var rs []server.ServerResource
	ts := []server.ServerResourceTemplate{{Template: mcp.NewResourceTemplate(catchAllTemplate, "planlock catch-all"), Handler: p.readResource}}
	if has {
		raw, err := listAll(ctx, send, "resources/list", "resources")
		if err != nil {
			fmt.Fprintf(p.cfg.Log, "planlock proxy: %v\n", err)
		}
		for _, r := range raw {
			var res mcp.Resource
			if json.Unmarshal(r, &res) != nil || res.URI == "" {
				continue
			}
			rs = append(rs, server.ServerResource{Resource: res, Handler: p.readResource})
		}
		raw, err = listAll(ctx, send, "resources/templates/list", "resourceTemplates")
		if err != nil {
			fmt.Fprintf(p.cfg.Log, "planlock proxy: %v\n", err)
		}
		for _, r := range raw {
			var t mcp.ResourceTemplate
			if json.Unmarshal(r, &t) != nil || t.URITemplate == nil || t.URITemplate.Raw() == catchAllTemplate {
				continue
			}
			ts = append(ts, server.ServerResourceTemplate{Template: t, Handler: p.readResource})
		}
	}
	p.srv.SetResources(rs...)
	p.srv.SetResourceTemplates(ts...)
}

// refreshPrompts registers the upstream's prompts and the plan's prompts the
// upstream does not offer (so that a get reaches the check and the upstream
// answers as it does).
func (p *Proxy) refreshPrompts(ctx context.Context, send sendFunc, has bool) {
	var ps []server.ServerPrompt
	seen := map[string]bool{}
	if has {
		raw, err := listAll(ctx, send, "prompts/list", "prompts")
		if err != nil {
			fmt.Fprintf(p.cfg.Log, "planlock proxy: %v\n", err)
		}
		for _, r := range raw {
			var pr mcp.Prompt
			if json.Unmarshal(r, &pr) != nil || pr.Name == "" {
				continue
			}
			seen[pr.Name] = true
			ps = append(ps, server.ServerPrompt{Prompt: pr, Handler: p.getPrompt})
		}
	}
	for _, pr := range p.cur.Load().plan.Prompts {
		if !seen[pr.Name] {
			ps = append(ps, server.ServerPrompt{Prompt: mcp.NewPrompt(pr.Name), Handler: p.getPrompt})
		}
	}
	p.srv.SetPrompts(ps...)
}

// relayExtra handles the upstream's resource and prompt notifications;
// it reports whether n was one.
func (p *Proxy) relayExtra(n mcp.JSONRPCNotification) bool {
	switch n.Method {
	case string(mcp.MethodNotificationResourceUpdated):
		uri, _ := n.Params.AdditionalFields["uri"].(string)
		if !p.ex.resources || p.cur.Load().plan.Resource(uri) == nil {
			return true
		}
		p.ex.subMu.Lock()
		var sids []string
		for sid := range p.ex.subs[uri] {
			if !strings.HasPrefix(sid, "listen ") {
				sids = append(sids, sid)
			}
		}
		var listens []*listenSub
		for _, l := range p.ex.listens {
			if l.uris[uri] {
				listens = append(listens, l)
			}
		}
		p.ex.subMu.Unlock()
		sort.Strings(sids)
		for _, sid := range sids {
			_ = p.srv.SendNotificationToSpecificClient(sid, n.Method, map[string]any{"uri": uri})
		}
		for _, l := range listens {
			// On the stream the listen request opened, tagged with its id.
			u := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{Method: n.Method,
				Params: mcp.NotificationParams{Meta: map[string]any{mcp.MetaKeySubscriptionID: l.id}, AdditionalFields: map[string]any{"uri": uri}}}}
			select {
			case l.session.NotificationChannel() <- u:
			default:
				fmt.Fprintf(p.cfg.Log, "planlock proxy: dropped resources/updated for %s: the listen stream is not reading\n", uri)
			}
		}
		return true
	case string(mcp.MethodNotificationResourcesListChanged):
		if p.ex.resources {
			go p.refreshLater(func(ctx context.Context) { p.refreshResources(ctx, p.up.Request, true) })
		}
		return true
	case string(mcp.MethodNotificationPromptsListChanged):
		if p.ex.prompts {
			go p.refreshLater(func(ctx context.Context) { p.refreshPrompts(ctx, p.up.Request, true) })
		}
		return true
	}
	return false
}

func (p *Proxy) refreshLater(f func(context.Context)) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f(ctx)
}

// planChangedExtras tells clients that the filtered lists may have changed.
func (p *Proxy) planChangedExtras() {
	if p.ex.resources {
		p.srv.SendNotificationToAllClients(string(mcp.MethodNotificationResourcesListChanged), nil)
	}
	if p.ex.prompts {
		p.srv.SendNotificationToAllClients(string(mcp.MethodNotificationPromptsListChanged), nil)
	}
}

func (p *Proxy) filterResources(_ context.Context, _ any, _ *mcp.ListResourcesRequest, res *mcp.ListResourcesResult) {
	if res == nil {
		return
	}
	plan := p.cur.Load().plan
	kept := res.Resources[:0]
	for _, r := range res.Resources {
		if plan.Resource(r.URI) != nil {
			kept = append(kept, r)
		}
	}
	res.Resources = kept
}

// templateAllowed reports whether a resource block names this template.
func templateAllowed(plan *hclplan.Plan, tmpl string) bool {
	for _, r := range plan.Resources {
		if r.URITemplate != "" && r.URITemplate == tmpl {
			return true
		}
	}
	return false
}

func (p *Proxy) filterTemplates(_ context.Context, _ any, _ *mcp.ListResourceTemplatesRequest, res *mcp.ListResourceTemplatesResult) {
	if res == nil {
		return
	}
	plan := p.cur.Load().plan
	kept := res.ResourceTemplates[:0]
	for _, t := range res.ResourceTemplates {
		if t.URITemplate != nil && templateAllowed(plan, t.URITemplate.Raw()) {
			kept = append(kept, t)
		}
	}
	res.ResourceTemplates = kept
}

func (p *Proxy) filterPrompts(_ context.Context, _ any, _ *mcp.ListPromptsRequest, res *mcp.ListPromptsResult) {
	if res == nil {
		return
	}
	plan := p.cur.Load().plan
	kept := res.Prompts[:0]
	for _, pr := range res.Prompts {
		if plan.Prompt(pr.Name) != nil {
			kept = append(kept, pr)
		}
	}
	res.Prompts = kept
}

// BlockedError is the JSON-RPC error of a blocked read, get, subscription
// or completion; its message is the reason.
type BlockedError struct{ Reason string }

func (e *BlockedError) Error() string { return e.Reason }

// blockExtra records a blocked request and returns its error; nothing
// reaches the upstream.
func (p *Proxy) blockExtra(ctx context.Context, plan *hclplan.Plan, call ledger.Call, reason string) error {
	logStateError(p.cfg.Log, p.cfg.State.Block(context.WithoutCancel(ctx), call, reason))
	return &BlockedError{Reason: fmt.Sprintf("blocked by plan %q: %s", plan.Name, reason)}
}

// reopenOp takes a multi-round retry of a read or get (op, of name): its
// sealed state and answers checked by openRetry against the block the first
// round was decided on (gate.Reopen), then the upstream's readiness. A
// refused retry is blocked; a retry the upstream cannot take ends the op,
// counted in its first round.
func (p *Proxy) reopenOp(ctx context.Context, st *planState, op gate.Op, name string, call ledger.Call, rt mcp.MultiRoundTripParams) (gate.OpDecision, roundState, json.RawMessage, error) {
	var d gate.OpDecision
	rs, answers, refused := p.openRetry(ctx, st.plan, string(op), name, call.Args, rt, func(rs roundState) *hclplan.InputRules {
		var ok bool
		if d, ok = st.gate.Reopen(op, rs.Index, rs.Step, name); !ok {
			return nil
		}
		if d.Resource != nil {
			return d.Resource.Input
		}
		return d.Prompt.Input
	})
	if refused != nil {
		return d, rs, nil, p.blockExtra(ctx, st.plan, call, refused.reason)
	}
	if ok, why := p.up.Ready(); !ok {
		err := errors.New(upstreamDown(why, "the retry was not forwarded"))
		p.completeExtra(ctx, rs.ticket(), err, time.Now())
		return d, rs, nil, err
	}
	return d, rs, answers, nil
}

// decideOp decides an op of the plan st pinned (gate.DecideOp) on the
// state's progress; call gets the op's counter, so that a refusal is
// recorded under it.
func (p *Proxy) decideOp(ctx context.Context, st *planState, op gate.Op, name string, args map[string]any, call *ledger.Call) gate.OpDecision {
	in := gate.OpInput{Now: p.cfg.Now(), Op: op, Name: name, Args: args}
	if op == gate.OpRead || op == gate.OpGet {
		prog := p.cfg.State.Progress(st.plan.Digest)
		in.Progress = ledgerProgress{&prog}
	}
	d := st.gate.DecideOp(in)
	if d.Count != nil && call != nil {
		call.Step, call.StepIndex = d.Count.Step(), d.Count.Index
	}
	if !d.Allowed {
		d.Reason = oneline.Of(d.Reason, 300)
	}
	return d
}

// readResource is every resources/read: plan expiry, the resource block,
// the durable count (max_reads), then the upstream. Reads take no part in
// the sequential order of the steps. A multi-round retry (multiround.go)
// takes the decision and count of its first round, as a prompt's does; an
// input_required result the resource's input block allows reaches a modern
// client through the after-read hook (mcp-go's resource handlers return
// contents, not a result: readRound), and a legacy client through
// planlock's own server-to-client requests (fulfilLegacy).
func (p *Proxy) readResource(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	defer p.inFlight(ctx)()
	ctx, st := p.withPlan(ctx)
	plan := st.plan
	uri := req.Params.URI
	args, _ := json.Marshal(map[string]string{"uri": uri})
	call := ledger.Call{PlanDigest: plan.Digest, Caller: callerOf(ctx), Tool: string(mcp.MethodResourcesRead), Args: args}
	var r *hclplan.Resource
	var round roundState
	params := map[string]any{"uri": uri}
	if isRetry(req.Params.MultiRoundTripParams) {
		d, rs, answers, err := p.reopenOp(ctx, st, gate.OpRead, uri, call, req.Params.MultiRoundTripParams)
		if err != nil {
			return nil, err
		}
		r, round, params = d.Resource, rs, retryParams(params, rs, answers)
	} else {
		d := p.decideOp(ctx, st, gate.OpRead, uri, nil, &call)
		if !d.Allowed {
			return nil, p.blockExtra(ctx, plan, call, d.Reason)
		}
		r = d.Resource
		t, err := p.reserveExtra(ctx, plan, call, *d.Count)
		if err != nil {
			return nil, err
		}
		round = roundState{Method: string(mcp.MethodResourcesRead), Name: uri, Args: argsDigest(args), Caller: call.Caller,
			Plan: plan.Digest, Step: call.Step, Index: call.StepIndex, Seq: t.Seq, Used: t.Used, At: t.At.UnixNano()}
	}
	t := round.ticket()
	start := time.Now()
	actx, doneAsking := ctx, func() {}
	if r.Input != nil {
		// A legacy upstream asks during the read (legacyask.go).
		actx, _, doneAsking = p.asking.start(ctx, r.Input, call, t.Seq)
	}
	cctx, cancel := context.WithTimeout(withInputCapabilities(actx, r.Input), p.cfg.CallTimeout)
	res, err := p.up.Request(cctx, "resources/read", params)
	cancel()
	doneAsking()
	if why := refusedInput(actx); why != "" {
		res, err = nil, errors.New(inputRefused(why))
	}
	var out *mcp.ReadResourceResult
	if err == nil {
		err = wire.CheckResultType(res) // a result that is not the read's: an error outcome (multiround.go)
		var un *wire.UnrelayedResult
		if errors.As(err, &un) && un.ResultType == string(mcp.ResultTypeInputRequired) && r.Input != nil {
			reqs, state, ierr := p.interim(ctx, res, r.Input, round)
			if ierr == nil {
				if modernRequest(ctx) {
					if rr := readRoundOf(req); rr != nil {
						rr.res = &mcp.ReadResourceResult{MultiRoundTripResult: mcp.MultiRoundTripResult{InputRequests: reqs, RequestState: state}}
						rr.res.ResultType = mcp.ResultTypeInputRequired
						return nil, nil
					}
					ierr = errors.New("the read's result cannot carry input requests here")
				} else {
					// Not an outcome yet: the retry completes or ends it.
					var answers mcp.InputResponses
					if answers, ierr = p.fulfilLegacy(ctx, reqs); ierr == nil {
						next := req
						next.Params.MultiRoundTripParams = mcp.MultiRoundTripParams{InputResponses: answers, RequestState: state}
						return p.readResource(ctx, next)
					}
				}
			}
			err = errors.New(inputRefused(oneline.Of(ierr.Error(), 300)))
		}
	}
	if err == nil {
		out, err = mcp.ParseReadResourceResult(&res)
	}
	p.completeExtra(ctx, t, err, start)
	if err != nil {
		return nil, fmt.Errorf("resources/read %s: %s; the read was counted (resource %q, %d of max_reads %d)", uri, oneline.Of(err.Error(), 300), r.Name, t.Used, r.MaxReads)
	}
	return out.Contents, nil
}

// readRoundKey is where the before-read hook leaves a readRound in the
// request's _meta (a value JSON cannot produce, so a client cannot forge
// it): the handler gets a copy of the request, sharing its _meta.
const readRoundKey = "planlock/read-round"

// readRound carries a read's input_required result from the handler to the
// after-read hook, which answers it instead of the contents.
type readRound struct{ res *mcp.ReadResourceResult }

func beforeRead(_ context.Context, _ any, req *mcp.ReadResourceRequest) {
	if req.Params.Meta == nil {
		req.Params.Meta = &mcp.Meta{}
	}
	if req.Params.Meta.AdditionalFields == nil {
		req.Params.Meta.AdditionalFields = map[string]any{}
	}
	req.Params.Meta.AdditionalFields[readRoundKey] = &readRound{}
}

func afterRead(_ context.Context, _ any, req *mcp.ReadResourceRequest, res *mcp.ReadResourceResult) {
	if rr := readRoundOf(*req); rr != nil && rr.res != nil && res != nil {
		*res = *rr.res
	}
}

func readRoundOf(req mcp.ReadResourceRequest) *readRound {
	if req.Params.Meta == nil {
		return nil
	}
	rr, _ := req.Params.Meta.AdditionalFields[readRoundKey].(*readRound)
	return rr
}

// modernRequest reports whether the request being served is of protocol
// 2026-07-28, whose client takes an input_required result itself.
func modernRequest(ctx context.Context) bool {
	info := server.RequestProtocolInfoFromContext(ctx)
	return info != nil && info.Modern
}

// fulfilLegacy asks a legacy client what a multi-round read needs, with the
// server-to-client requests of its protocol (interim checked them against
// the plan and the client's session), one at a time.
func (p *Proxy) fulfilLegacy(ctx context.Context, reqs mcp.InputRequests) (mcp.InputResponses, error) {
	out := make(mcp.InputResponses, len(reqs))
	for _, id := range slices.Sorted(maps.Keys(reqs)) {
		in := reqs[id]
		var err error
		switch {
		case in.Method == mcp.MethodElicitationCreate && in.Elicitation != nil:
			var res *mcp.ElicitationResult
			if res, err = p.srv.RequestElicitation(ctx, mcp.ElicitationRequest{Request: mcp.Request{Method: string(mcp.MethodElicitationCreate)}, Params: *in.Elicitation}); err == nil && res != nil {
				out[id] = mcp.NewElicitationInputResponse(*res)
			}
		case in.Method == mcp.MethodSamplingCreateMessage && in.Sampling != nil:
			var res *mcp.CreateMessageResult
			//lint:ignore SA1019 a legacy client is asked for sampling with the request of its own protocol
			if res, err = p.srv.RequestSampling(ctx, mcp.CreateMessageRequest{Request: mcp.Request{Method: string(mcp.MethodSamplingCreateMessage)}, CreateMessageParams: *in.Sampling}); err == nil && res != nil {
				out[id] = mcp.NewSamplingInputResponse(*res)
			}
		case in.Method == mcp.MethodListRoots:
			var res *mcp.ListRootsResult
			if res, err = p.srv.RequestRoots(ctx, mcp.ListRootsRequest{Request: mcp.Request{Method: string(mcp.MethodListRoots)}}); err == nil && res != nil {
				out[id] = mcp.NewRootsInputResponse(*res)
			}
		default:
			err = fmt.Errorf("input request of method %q", in.Method)
		}
		if err != nil {
			return nil, fmt.Errorf("input request %q: the client did not answer: %s", oneline.Of(id, 60), oneline.Of(err.Error(), 200))
		}
		if _, ok := out[id]; !ok {
			return nil, fmt.Errorf("input request %q: the client gave no answer", oneline.Of(id, 60))
		}
	}
	return out, nil
}

// getPrompt is every prompts/get: plan expiry, the prompt block, its
// argument constraints, the durable count (max_calls), then the upstream.
// A multi-round retry (multiround.go) takes instead the decision and count
// of its first round, once its requestState and answers pass openRetry.
// Either way the result is another round of input requests the prompt's
// input block allows (relayed with planlock's requestState, not yet an
// outcome), or the outcome, recorded.
func (p *Proxy) getPrompt(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	defer p.inFlight(ctx)()
	ctx, st := p.withPlan(ctx)
	plan := st.plan
	name := req.Params.Name
	promptArgs := req.Params.Arguments
	if promptArgs == nil {
		promptArgs = map[string]string{}
	}
	// What is checked is what is sent: the arguments are forwarded
	// re-encoded from this map (the raw bytes passed strictArgs first).
	args, _ := json.Marshal(map[string]any{"name": name, "arguments": promptArgs})
	call := ledger.Call{PlanDigest: plan.Digest, Caller: callerOf(ctx), Tool: string(mcp.MethodPromptsGet), Args: args}
	var pr *hclplan.Prompt
	var round roundState
	params := map[string]any{"name": name, "arguments": promptArgs}
	if isRetry(req.Params.MultiRoundTripParams) {
		d, rs, answers, err := p.reopenOp(ctx, st, gate.OpGet, name, call, req.Params.MultiRoundTripParams)
		if err != nil {
			return nil, err
		}
		pr, round, params = d.Prompt, rs, retryParams(params, rs, answers)
	} else {
		checked := make(map[string]any, len(promptArgs))
		for k, v := range promptArgs {
			checked[k] = v
		}
		d := p.decideOp(ctx, st, gate.OpGet, name, checked, &call)
		if !d.Allowed {
			return nil, p.blockExtra(ctx, plan, call, d.Reason)
		}
		pr = d.Prompt
		t, err := p.reserveExtra(ctx, plan, call, *d.Count)
		if err != nil {
			return nil, err
		}
		round = roundState{Method: string(mcp.MethodPromptsGet), Name: name, Args: argsDigest(args), Caller: call.Caller,
			Plan: plan.Digest, Step: call.Step, Index: call.StepIndex, Seq: t.Seq, Used: t.Used, At: t.At.UnixNano()}
	}
	t := round.ticket()
	start := time.Now()
	actx, doneAsking := ctx, func() {}
	if pr.Input != nil {
		// A legacy upstream asks during the get (legacyask.go).
		actx, _, doneAsking = p.asking.start(ctx, pr.Input, call, t.Seq)
	}
	cctx, cancel := context.WithTimeout(withInputCapabilities(actx, pr.Input), p.cfg.CallTimeout)
	res, err := p.up.Request(cctx, "prompts/get", params)
	cancel()
	doneAsking()
	if why := refusedInput(actx); why != "" {
		res, err = nil, errors.New(inputRefused(why))
	}
	var out *mcp.GetPromptResult
	if err == nil {
		err = wire.CheckResultType(res)
		var un *wire.UnrelayedResult
		if errors.As(err, &un) && un.ResultType == string(mcp.ResultTypeInputRequired) && pr.Input != nil {
			reqs, state, ierr := p.interim(ctx, res, pr.Input, round)
			if ierr == nil {
				return &mcp.GetPromptResult{Result: mcp.Result{ResultType: mcp.ResultTypeInputRequired},
					MultiRoundTripResult: mcp.MultiRoundTripResult{InputRequests: reqs, RequestState: state}}, nil
			}
			err = errors.New(inputRefused(oneline.Of(ierr.Error(), 300)))
		}
	}
	if err == nil {
		out, err = mcp.ParseGetPromptResult(&res)
	}
	if out != nil {
		// Complete: its inputRequests and requestState mean nothing.
		out.ResultType, out.MultiRoundTripResult = "", mcp.MultiRoundTripResult{}
	}
	p.completeExtra(ctx, t, err, start)
	if err != nil {
		return nil, fmt.Errorf("prompts/get %s: %s; the get was counted (prompt %q, %d of max_calls %d)", name, oneline.Of(err.Error(), 300), pr.Name, t.Used, pr.MaxCalls)
	}
	return out, nil
}

func expiredReason(plan *hclplan.Plan) string {
	return fmt.Sprintf("plan %q expired at %s; no call is allowed", plan.Name, plan.Expires.UTC().Format(time.RFC3339))
}

// reserveExtra takes one read or get of max durably before anything is
// forwarded; exhausted means blocked, any other failure means not forwarded.
func (p *Proxy) reserveExtra(ctx context.Context, plan *hclplan.Plan, call ledger.Call, c gate.Counter) (ledger.Ticket, error) {
	if ok, why := p.up.Ready(); !ok {
		return ledger.Ticket{}, errors.New(upstreamDown(why, call.Tool+" was not forwarded and not counted"))
	}
	t, err := p.cfg.State.Reserve(context.WithoutCancel(ctx), ledger.Reservation{Call: call, MaxCalls: c.Max})
	var ex *ledger.ExhaustedError
	switch {
	case errors.As(err, &ex):
		// Used up by concurrent ops since DecideOp: the count decides.
		return t, p.blockExtra(ctx, plan, call, fmt.Sprintf("%s: %s %d used up (%d forwarded)", c.Step(), c.Limit, ex.Max, ex.Used))
	case err != nil:
		return t, fmt.Errorf("planlock could not record %s, so it was not forwarded: %s", call.Tool, stateError(err))
	}
	return t, nil
}

func (p *Proxy) completeExtra(ctx context.Context, t ledger.Ticket, err error, start time.Time) {
	o := ledger.Outcome{OK: err == nil, Latency: time.Since(start)}
	if err != nil {
		o.Err = oneline.Of(err.Error(), 300)
	}
	logStateError(p.cfg.Log, p.cfg.State.Complete(context.WithoutCancel(ctx), t, o))
}

// precheckRequest runs before mcp-go dispatches a request. For the resource
// and prompt methods it refuses parameters that two JSON parsers may read
// differently (as tools/call arguments are), and it decides subscriptions:
// mcp-go acknowledges a subscribe without a way to refuse it, so the check,
// the upstream subscribe and the bookkeeping happen here.
func (p *Proxy) precheckRequest(ctx context.Context, _ any, message any) error {
	raw, ok := message.(json.RawMessage)
	if !ok {
		return nil
	}
	var m struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return nil // mcp-go answers a bad message itself
	}
	switch mcp.MCPMethod(m.Method) {
	case mcp.MethodResourcesRead, mcp.MethodResourcesSubscribe, mcp.MethodResourcesUnsubscribe:
		if !p.ex.resources {
			return nil // method not found, from mcp-go
		}
	case mcp.MethodPromptsGet:
		if !p.ex.prompts {
			return nil
		}
	case mcp.MethodCompletionComplete:
		if !p.ex.resources && !p.ex.prompts {
			return nil
		}
	default:
		return nil
	}
	st := p.cur.Load()
	plan := st.plan
	params := m.Params
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage("{}")
	}
	decoded, err := wire.DecodeArgs(params)
	if err != nil {
		return p.blockExtra(ctx, plan, ledger.Call{PlanDigest: plan.Digest, Caller: callerOf(ctx), Tool: m.Method},
			fmt.Sprintf("%s: params must be one JSON object: %v", m.Method, err))
	}
	uri, _ := decoded["uri"].(string)
	switch mcp.MCPMethod(m.Method) {
	case mcp.MethodResourcesSubscribe:
		return p.subscribe(ctx, st, uri)
	case mcp.MethodResourcesUnsubscribe:
		p.unsubscribe(ctx, sessionID(ctx), uri)
	}
	return nil
}

func sessionID(ctx context.Context) string {
	if s := server.ClientSessionFromContext(ctx); s != nil {
		return s.SessionID()
	}
	return ""
}

// subscribe allows a subscription to a URI the plan allows to read, and
// subscribes upstream for the first subscriber.
func (p *Proxy) subscribe(ctx context.Context, st *planState, uri string) error {
	plan := st.plan
	args, _ := json.Marshal(map[string]string{"uri": uri})
	call := ledger.Call{PlanDigest: plan.Digest, Caller: callerOf(ctx), Tool: string(mcp.MethodResourcesSubscribe), Args: args}
	if uri == "" {
		return nil // mcp-go answers "uri is required"
	}
	if d := p.decideOp(ctx, st, gate.OpSubscribe, uri, nil, nil); !d.Allowed {
		return p.blockExtra(ctx, plan, call, d.Reason)
	}
	return p.subscribeAs(ctx, sessionID(ctx), uri)
}

// filterListen decides the resourceSubscriptions of a subscriptions/listen
// request (protocol 2026-07-28) before mcp-go acknowledges it: a URI the
// plan does not allow is taken out and recorded as refused, as legacy
// resources/subscribe refuses it; an allowed one is subscribed upstream for
// its first subscriber (as a legacy subscription is) and its
// resources/updated delivered on the stream (relayExtra) until the stream
// ends (endListen). One that cannot be delivered (the upstream has no
// subscriptions, or refused this one) is taken out and recorded too: what
// is acknowledged is delivered. The list-change opt-ins pass.
func (p *Proxy) filterListen(ctx context.Context, id any, req *mcp.SubscriptionsListenRequest) {
	uris := req.Params.Notifications.ResourceSubscriptions
	if len(uris) == 0 {
		return
	}
	req.Params.Notifications.ResourceSubscriptions = nil
	ctx, st := p.withPlan(ctx)
	plan := st.plan
	session := server.ClientSessionFromContext(ctx)
	l := &listenSub{session: session, id: id, uris: map[string]bool{}}
	l.key = fmt.Sprintf("listen %p", l)
	refuse := func(uri, reason string) {
		args, _ := json.Marshal(map[string]string{"uri": uri})
		call := ledger.Call{PlanDigest: plan.Digest, Caller: callerOf(ctx), Tool: string(mcp.MethodSubscriptionsListen), Args: args}
		_ = p.blockExtra(ctx, plan, call, reason)
	}
	seen := make(map[string]bool, len(uris))
	for _, uri := range uris {
		if seen[uri] {
			continue
		}
		seen[uri] = true
		d := p.decideOp(ctx, st, gate.OpSubscribe, uri, nil, nil)
		switch {
		case !d.Allowed:
			refuse(uri, d.Reason)
		case session == nil || id == nil || !p.ex.subscribe.Load():
			refuse(uri, fmt.Sprintf("resource %q: the upstream offers no subscriptions, so none was acknowledged", uri))
		default:
			if err := p.subscribeAs(ctx, l.key, uri); err != nil {
				refuse(uri, fmt.Sprintf("resource %q: %s, so the subscription was not acknowledged", uri, oneline.Of(err.Error(), 300)))
				continue
			}
			l.uris[uri] = true
			req.Params.Notifications.ResourceSubscriptions = append(req.Params.Notifications.ResourceSubscriptions, uri)
		}
	}
	if len(l.uris) == 0 {
		return
	}
	p.ex.subMu.Lock()
	p.ex.listens[listenKey{session, fmt.Sprint(id)}] = l
	p.ex.subMu.Unlock()
}

// endListen forgets a listen stream's subscriptions once it ended, and
// unsubscribes upstream after a URI's last subscriber.
func (p *Proxy) endListen(ctx context.Context, id any) {
	k := listenKey{server.ClientSessionFromContext(ctx), fmt.Sprint(id)}
	p.ex.subMu.Lock()
	l := p.ex.listens[k]
	delete(p.ex.listens, k)
	p.ex.subMu.Unlock()
	if l == nil {
		return
	}
	for uri := range l.uris {
		p.unsubscribe(context.WithoutCancel(ctx), l.key, uri)
	}
}

// subscribeAs records subscriber sid of uri and subscribes upstream for the
// first one.
func (p *Proxy) subscribeAs(ctx context.Context, sid, uri string) error {
	p.ex.subMu.Lock()
	first := len(p.ex.subs[uri]) == 0
	if p.ex.subs[uri] == nil {
		p.ex.subs[uri] = map[string]bool{}
	}
	p.ex.subs[uri][sid] = true
	p.ex.subMu.Unlock()
	if first && p.up.Modern() {
		// A modern upstream: planlock's listen stream, replaced by one
		// that names uri too, and only what it acknowledged counts.
		cctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
		acked, err := p.up.Relisten(cctx)
		cancel()
		if err == nil && !slices.Contains(acked.ResourceSubscriptions, uri) {
			err = errors.New("the upstream did not acknowledge it")
		}
		if err != nil {
			if p.unsubscribeLocal(sid, uri) {
				p.relistenLater()
			}
			return fmt.Errorf("subscriptions/listen %s: %s", uri, oneline.Of(err.Error(), 300))
		}
		return nil
	}
	if first {
		cctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
		_, err := p.up.Request(cctx, "resources/subscribe", map[string]any{"uri": uri})
		cancel()
		if err != nil {
			p.unsubscribeLocal(sid, uri)
			return fmt.Errorf("resources/subscribe %s: %s", uri, oneline.Of(err.Error(), 300))
		}
	}
	return nil
}

// listenFilter is what planlock listens for on a modern upstream: the
// URIs its clients are subscribed to (each allowed by the plan when it was
// subscribed; a refused one never gets here) and the list changes it
// re-reads.
func (p *Proxy) listenFilter() mcp.SubscriptionFilter {
	f := mcp.SubscriptionFilter{ToolsListChanged: true, ResourcesListChanged: p.ex.resources, PromptsListChanged: p.ex.prompts}
	p.ex.subMu.Lock()
	for uri := range p.ex.subs {
		f.ResourceSubscriptions = append(f.ResourceSubscriptions, uri)
	}
	p.ex.subMu.Unlock()
	sort.Strings(f.ResourceSubscriptions)
	return f
}

// relistenLater replaces the listen stream of a modern upstream after a
// URI's last subscriber left (best effort: a failure leaves a stream that
// delivers a URI nobody reads, which relayExtra drops).
func (p *Proxy) relistenLater() {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.CallTimeout)
		defer cancel()
		if _, err := p.up.Relisten(ctx); err != nil {
			fmt.Fprintf(p.cfg.Log, "planlock proxy: replace the upstream listen stream: %s\n", oneline.Of(err.Error(), 300))
		}
	}()
}

// unsubscribeLocal forgets one session's subscription; it reports whether
// that was the URI's last subscriber.
func (p *Proxy) unsubscribeLocal(sid, uri string) bool {
	p.ex.subMu.Lock()
	defer p.ex.subMu.Unlock()
	s := p.ex.subs[uri]
	if !s[sid] {
		return false
	}
	delete(s, sid)
	if len(s) == 0 {
		delete(p.ex.subs, uri)
		return true
	}
	return false
}

// unsubscribe forgets a session's subscription and unsubscribes upstream
// after the last one (best effort).
func (p *Proxy) unsubscribe(ctx context.Context, sid, uri string) {
	if !p.unsubscribeLocal(sid, uri) {
		return
	}
	if p.up.Modern() {
		p.relistenLater()
		return
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
	_, _ = p.up.Request(cctx, "resources/unsubscribe", map[string]any{"uri": uri})
	cancel()
}

// dropSubscriptions forgets a closed session's subscriptions.
func (p *Proxy) dropSubscriptions(sid string) {
	p.ex.subMu.Lock()
	var uris []string
	for u, s := range p.ex.subs {
		if s[sid] {
			uris = append(uris, u)
		}
	}
	p.ex.subMu.Unlock()
	for _, u := range uris {
		go p.unsubscribe(context.Background(), sid, u)
	}
}

// auditUnknownExtra records a read or get that mcp-go refused because
// nothing is registered for it (a prompt neither planned nor offered, a URI
// no template can match).
func (p *Proxy) auditUnknownExtra(ctx context.Context, _ any, method mcp.MCPMethod, message any, err error) {
	plan := p.cur.Load().plan
	switch req := message.(type) {
	case *mcp.ReadResourceRequest:
		if method == mcp.MethodResourcesRead && errors.Is(err, server.ErrResourceNotFound) {
			args, _ := json.Marshal(map[string]string{"uri": req.Params.URI})
			_ = p.blockExtra(ctx, plan, ledger.Call{PlanDigest: plan.Digest, Caller: callerOf(ctx), Tool: string(method), Args: args},
				fmt.Sprintf("resource %q is not in plan %q", req.Params.URI, plan.Name))
		}
	case *mcp.GetPromptRequest:
		if method == mcp.MethodPromptsGet && errors.Is(err, server.ErrPromptNotFound) {
			args, _ := json.Marshal(map[string]any{"name": req.Params.Name, "arguments": req.Params.Arguments})
			_ = p.blockExtra(ctx, plan, ledger.Call{PlanDigest: plan.Digest, Caller: callerOf(ctx), Tool: string(method), Args: args},
				fmt.Sprintf("prompt %q is not in plan %q (and the upstream does not offer it)", req.Params.Name, plan.Name))
		}
	}
}

// promptCompleter answers completion/complete for planned prompts only.
type promptCompleter struct{ p *Proxy }

func (c promptCompleter) CompletePromptArgument(ctx context.Context, name string, arg mcp.CompleteArgument, cc mcp.CompleteContext) (*mcp.Completion, error) {
	ctx, st := c.p.withPlan(ctx)
	plan := st.plan
	if d := c.p.decideOp(ctx, st, gate.OpCompletePrompt, name, nil, nil); !d.Allowed {
		args, _ := json.Marshal(map[string]any{"ref": map[string]string{"type": "ref/prompt", "name": name}, "argument": arg})
		return nil, c.p.blockExtra(ctx, plan, ledger.Call{PlanDigest: plan.Digest, Caller: callerOf(ctx), Tool: string(mcp.MethodCompletionComplete), Args: args}, d.Reason)
	}
	return c.p.complete(ctx, map[string]any{"type": "ref/prompt", "name": name}, arg, cc)
}

// resourceCompleter answers completion/complete for the plan's resource
// templates (or URIs it allows) only.
type resourceCompleter struct{ p *Proxy }

func (c resourceCompleter) CompleteResourceArgument(ctx context.Context, uri string, arg mcp.CompleteArgument, cc mcp.CompleteContext) (*mcp.Completion, error) {
	ctx, st := c.p.withPlan(ctx)
	plan := st.plan
	if d := c.p.decideOp(ctx, st, gate.OpCompleteResource, uri, nil, nil); !d.Allowed {
		args, _ := json.Marshal(map[string]any{"ref": map[string]string{"type": "ref/resource", "uri": uri}, "argument": arg})
		return nil, c.p.blockExtra(ctx, plan, ledger.Call{PlanDigest: plan.Digest, Caller: callerOf(ctx), Tool: string(mcp.MethodCompletionComplete), Args: args}, d.Reason)
	}
	return c.p.complete(ctx, map[string]any{"type": "ref/resource", "uri": uri}, arg, cc)
}

// complete forwards an allowed completion request. Completions suggest
// values and read nothing the plan counts, so they are not counted.
func (p *Proxy) complete(ctx context.Context, ref map[string]any, arg mcp.CompleteArgument, cc mcp.CompleteContext) (*mcp.Completion, error) {
	params := map[string]any{"ref": ref, "argument": arg}
	if len(cc.Arguments) > 0 {
		params["context"] = cc
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
	defer cancel()
	res, err := p.up.Request(cctx, "completion/complete", params)
	if err != nil {
		return nil, fmt.Errorf("completion/complete: %s", oneline.Of(err.Error(), 300))
	}
	if err := wire.CheckResultType(res); err != nil {
		// Its values are not a completion's (multiround.go).
		return nil, fmt.Errorf("completion/complete: %s", err.Error())
	}
	var r mcp.CompleteResult
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, fmt.Errorf("completion/complete: bad result: %w", err)
	}
	return &r.Completion, nil
}

// orderState keeps resource reads and prompt gets, counted under step
// indexes after a plan's steps, out of the sequential order: the ledger's
// Current is the highest index with a forwarded call, so a read would
// otherwise close every step. Current is brought back to the highest step
// with a forwarded call.
//
// It also holds decisions back while the stdio lane answers a call before
// its outcome counts (holdForAnswer).
type orderState struct {
	State
	mu    sync.Mutex
	steps map[string]int // plan digest → number of steps

	answer    sync.Mutex  // held from a call's answer until its outcome counts
	answering atomic.Bool // answer is held: read first, so others never touch the lock
}

// holdForAnswer holds back every read of the progress and every
// reservation until done is called: from before a call is answered until
// its outcome has counted and is recorded, so that a call the answer
// prompts is decided on that outcome and recorded after it. The flag is set
// before the answer is written, so whoever reads a request the answer
// prompted sees it set.
func (o *orderState) holdForAnswer() (done func()) {
	o.answer.Lock()
	o.answering.Store(true)
	return func() {
		o.answering.Store(false)
		o.answer.Unlock()
	}
}

// answered waits for an answer whose outcome is still to count.
func (o *orderState) answered() {
	if o.answering.Load() {
		o.answer.Lock()
		defer o.answer.Unlock() // nothing to do under it: waiting is the point
	}
}

// Observe passes an observed call's record on to the wrapped state (New
// checked that it records them when observe mode is on).
func (o *orderState) Observe(ctx context.Context, c ledger.Call, decision, reason string) error {
	ob, ok := o.State.(Observer)
	if !ok {
		return errors.New("the state does not record observed calls")
	}
	return ob.Observe(ctx, c, decision, reason)
}

func (o *orderState) register(plan *hclplan.Plan) {
	o.mu.Lock()
	o.steps[plan.Digest] = len(plan.Steps)
	o.mu.Unlock()
}

func (o *orderState) clamp(digest string, pr *ledger.Progress) {
	o.mu.Lock()
	n, ok := o.steps[digest]
	o.mu.Unlock()
	if !ok || pr.Current < n {
		return
	}
	cur := 0
	for i := n - 1; i > 0; i-- {
		if pr.Calls(i) > 0 {
			cur = i
			break
		}
	}
	pr.Current = cur
}

// Progress is the inner state's, with Current among the steps.
func (o *orderState) Progress(digest string) ledger.Progress {
	o.answered()
	pr := o.State.Progress(digest)
	o.clamp(digest, &pr)
	return pr
}

// Reserve passes the reservation's order check a Progress with Current
// among the steps.
func (o *orderState) Reserve(ctx context.Context, rv ledger.Reservation) (ledger.Ticket, error) {
	o.answered()
	if check := rv.Check; check != nil {
		rv.Check = func(pr ledger.Progress) error {
			o.clamp(rv.PlanDigest, &pr)
			return check(pr)
		}
	}
	return o.State.Reserve(ctx, rv)
}

// Block records a refusal once an answered call's outcome has counted, as
// reads of the progress wait: a request the answer prompted and refused
// before any decision (arguments that are no object, a multi-round retry)
// is recorded after that outcome too.
func (o *orderState) Block(ctx context.Context, c ledger.Call, reason string) error {
	o.answered()
	return o.State.Block(ctx, c, reason)
}

// CompleteLater is the wrapped state's when it has one (ledger.Ledger's);
// otherwise the outcome is recorded at once and write does nothing.
func (o *orderState) CompleteLater(ctx context.Context, t ledger.Ticket, out ledger.Outcome) (write func(), err error) {
	if lc, ok := o.State.(LaterCompleter); ok {
		return lc.CompleteLater(ctx, t, out)
	}
	return func() {}, o.State.Complete(ctx, t, out)
}

// Catalog is what an upstream offers: its tools, and its resources, resource
// templates and prompts when it announces those capabilities, all raw.
type Catalog struct {
	Tools, Resources, Templates, Prompts []json.RawMessage
}

// FetchCatalog connects once to an upstream, reads its lists raw and closes
// the connection. A resource or prompt list the upstream fails to give is
// left empty (tools are what a plan needs first).
func FetchCatalog(ctx context.Context, cfg UpstreamConfig) (Catalog, error) {
	var c Catalog
	u := newUpstream(cfg, nil, func(t []json.RawMessage) { c.Tools = t })
	u.onConnect = func(ctx context.Context, send sendFunc, caps upstreamCaps) {
		if caps.Resources {
			c.Resources, _ = listAll(ctx, send, "resources/list", "resources")
			c.Templates, _ = listAll(ctx, send, "resources/templates/list", "resourceTemplates")
		}
		if caps.Prompts {
			c.Prompts, _ = listAll(ctx, send, "prompts/list", "prompts")
		}
	}
	conn, err := u.connect(ctx)
	if err != nil {
		return Catalog{}, err
	}
	_ = conn.tr.Close()
	return c, nil
}
