package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/proxy/gate"
	"github.com/planlock/planlock/proxy/ledger"
)

// ledgerProgress lets the gate read the ledger's progress.
type ledgerProgress struct{ p *ledger.Progress }

func (l ledgerProgress) Current() int    { return l.p.Current }
func (l ledgerProgress) Done(i int) bool { return l.p.Done(i) }
func (l ledgerProgress) Calls(i int) int { return l.p.Calls(i) }

// handleCall is every tools/call: the gate in the contract's order, then the
// durable count, then the upstream.
func (p *Proxy) handleCall(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctx, st := p.withPlan(ctx)
	plan := st.plan
	tool := req.Params.Name
	raw := bytes.TrimSpace(req.Params.RawArguments)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}") // no arguments is {} (contract)
	}
	call := ledger.Call{PlanDigest: plan.Digest, Tool: tool, Args: raw}
	args, err := decodeArgs(raw)
	if err != nil {
		call.Args = nil
		return p.block(ctx, call, fmt.Sprintf("tool %q: arguments must be a JSON object: %v", tool, err)), nil
	}

	prog := p.cfg.State.Progress(plan.Digest)
	step, fail := st.gate.Check(p.cfg.Now(), tool, args, ledgerProgress{&prog})
	if fail != nil {
		if fail.Step != nil {
			call.Step, call.StepIndex = fail.Step.Name, fail.Step.Index
		}
		if fail.Rule != gate.RuleExpired && plan.OnViolation == hclplan.ViolationHold {
			return p.hold(ctx, req, call, fail.Step, fail.Reason, true), nil
		}
		return p.block(ctx, call, fail.Reason), nil
	}
	call.Step, call.StepIndex = step.Name, step.Index

	// Approval and pin: these may Hold.
	if step.Approval == hclplan.ApprovalEach {
		return p.hold(ctx, req, call, step, fmt.Sprintf("step %q needs a human approval for each call", step.Name), false), nil
	}
	p.heldMu.Lock()
	why, stepHeld := st.held[step.Index]
	p.heldMu.Unlock()
	if stepHeld {
		return p.hold(ctx, req, call, step, why, false), nil
	}
	if step.Pin != nil {
		if reason, observed := p.checkPin(ctx, step); reason != "" {
			return p.holdWith(ctx, req, call, step, reason, false, observed), nil
		}
	}
	return p.forward(ctx, req, call, step, "", false), nil
}

// onErrorHeld marks the reason of a step held by on_error = "hold".
const onErrorHeld = "is on hold after a failed call"

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}

func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(text)}, IsError: true}
}

// block records a blocked call and answers it; nothing reaches the upstream.
func (p *Proxy) block(ctx context.Context, call ledger.Call, reason string) *mcp.CallToolResult {
	if err := p.cfg.State.Block(context.WithoutCancel(ctx), call, reason); err != nil {
		fmt.Fprintf(p.cfg.Log, "planlock proxy: audit: %v\n", err)
	}
	return errorResult(fmt.Sprintf("blocked by plan %q: %s", p.current(ctx).plan.Name, reason))
}

// hold answers a call that needs a human. An approved hold for exactly this
// call runs it once; a rejected one blocks; otherwise the hold is recorded
// (or found again) and the call returns at once. violation says the hold
// stands for a broken rule (on_violation = "hold"): its approval lets the
// call past the plan's order and max_calls. Approval, pin and on_error holds
// do not: the call still obeys them, atomically with its count.
func (p *Proxy) hold(ctx context.Context, req mcp.CallToolRequest, call ledger.Call, step *hclplan.Step, reason string, violation bool) *mcp.CallToolResult {
	return p.holdWith(ctx, req, call, step, reason, violation, "")
}

// holdWith is hold with the pin value observed for a pin hold ("" otherwise).
func (p *Proxy) holdWith(ctx context.Context, req mcp.CallToolRequest, call ledger.Call, step *hclplan.Step, reason string, violation bool, observedPin string) *mcp.CallToolResult {
	if p.cfg.Approvals != nil { // holds are approval pull requests (holdpr.go)
		return p.holdByPR(ctx, req, call, step, reason, violation, observedPin)
	}
	if h, ok := p.cfg.State.FindHold(call); ok {
		switch h.State {
		case ledger.HoldApproved:
			if step == nil {
				return p.block(ctx, call, fmt.Sprintf("hold %s is approved, but tool %q is in no step of the plan: it needs a new plan", h.ID, call.Tool))
			}
			return p.forward(ctx, req, call, step, h.ID, violation)
		case ledger.HoldRejected:
			return p.block(ctx, call, fmt.Sprintf("hold %s for exactly this call was rejected; do not retry it", h.ID))
		}
	}
	h, err := p.cfg.State.Hold(context.WithoutCancel(ctx), call, reason, p.cfg.Now().Add(p.cfg.HoldTTL))
	if err != nil {
		return errorResult(fmt.Sprintf("held: %s; but planlock could not record the hold (%v); the call was not forwarded", reason, err))
	}
	where := fmt.Sprintf("hold %s", h.ID)
	if h.PRURL != "" {
		where += ", pull request " + h.PRURL
	}
	return errorResult(fmt.Sprintf("held: %s; needs approval (%s, expires %s). Ask the user to approve it (planlock holds show %s), then repeat exactly the same call.",
		reason, where, h.Expires.UTC().Format(time.RFC3339), h.ID))
}

// checkPin re-reads the pinned value through the upstream; "" means it
// matches. On a mismatch it also returns the value read.
func (p *Proxy) checkPin(ctx context.Context, step *hclplan.Step) (reason, observed string) {
	pin := step.Pin
	cctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
	defer cancel()
	res, err := p.up.Request(cctx, "tools/call", map[string]any{"name": pin.Tool, "arguments": pin.Args})
	if err != nil {
		return fmt.Sprintf("step %q: pin read %s(%s) failed: %v", step.Name, pin.Tool, pin.Args.String(), oneLine(err.Error())), ""
	}
	doc, err := resultDocument(res)
	if err != nil {
		return fmt.Sprintf("step %q: pin read %s(%s) failed: %v", step.Name, pin.Tool, pin.Args.String(), err), ""
	}
	got, ok := pin.Lookup(doc)
	if !ok {
		return fmt.Sprintf("step %q: pin field %q is missing from the result of %s", step.Name, pin.Field, pin.Tool), ""
	}
	if !pin.Eq.Equal(got) {
		b, _ := hclplan.CanonicalJSON(got)
		return fmt.Sprintf("step %q: pin %s.%s = %s, want %s (it changed since the plan was approved)", step.Name, pin.Tool, pin.Field, b, pin.Eq.String()), pinText(got, b)
	}
	return "", ""
}

// resultDocument is the JSON document of a tool result that a pin reads:
// structuredContent when present, else the first text content parsed as JSON.
func resultDocument(raw json.RawMessage) (any, error) {
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
			msg = oneLine(r.Content[0].Text)
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
	d := json.NewDecoder(bytes.NewReader(src))
	d.UseNumber()
	var doc any
	if err := d.Decode(&doc); err != nil {
		return nil, fmt.Errorf("the result is not JSON: %w", err)
	}
	return doc, nil
}

// forward counts the call durably, then sends it upstream and records the
// outcome. holdID, when set, consumes that approved hold in the same record;
// overrule lets a human-approved violation past order and max_calls.
func (p *Proxy) forward(ctx context.Context, req mcp.CallToolRequest, call ledger.Call, step *hclplan.Step, holdID string, overrule bool) *mcp.CallToolResult {
	if ok, why := p.up.Ready(); !ok {
		// Not counted: nothing was sent.
		return errorResult(fmt.Sprintf("upstream unavailable, the call was not forwarded and not counted: %v", why))
	}
	st := p.current(ctx)
	rv := ledger.Reservation{Call: call, MaxCalls: step.MaxCalls, HoldID: holdID, OverLimit: overrule && holdID != ""}
	if !rv.OverLimit {
		// The order and max_calls checks again, atomic with the count.
		rv.Check = func(pr ledger.Progress) error {
			if f := st.gate.Recheck(step, ledgerProgress{&pr}); f != nil {
				return f
			}
			return nil
		}
	}
	t, err := p.cfg.State.Reserve(context.WithoutCancel(ctx), rv)
	if err != nil {
		var f *gate.Failure
		var ex *ledger.ExhaustedError
		reason := ""
		switch {
		case errors.As(err, &f):
			reason = f.Reason
		case errors.As(err, &ex):
			reason = ex.Error()
		case holdID != "" && errors.Is(err, ledger.ErrHoldState):
			// An identical call consumed the approval first.
			return p.hold(ctx, req, call, step, "the approval of this call was used by an identical call", overrule)
		default:
			// Fail closed: without a durable count there is no call.
			return errorResult(fmt.Sprintf("planlock could not record the call, so it was not forwarded: %v", oneLine(err.Error())))
		}
		if st.plan.OnViolation == hclplan.ViolationHold && holdID == "" {
			return p.hold(ctx, req, call, step, reason, true)
		}
		return p.block(ctx, call, reason)
	}
	noteTicket(ctx, t.Seq) // holdran.go

	ptok, done := p.progressFor(ctx, req)
	defer done()
	params := map[string]any{"name": call.Tool, "arguments": json.RawMessage(call.Args)}
	if ptok != "" {
		params["_meta"] = map[string]any{"progressToken": ptok}
	}
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
	res, err := p.up.Request(cctx, "tools/call", params)
	timedOut := errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	cancel()
	lat := time.Since(start)

	var result *mcp.CallToolResult
	var outcome ledger.Outcome
	switch {
	case err != nil:
		msg := ""
		switch {
		case timedOut:
			msg = fmt.Sprintf("upstream did not answer within %s", p.cfg.CallTimeout)
		case ctx.Err() != nil:
			msg = "cancelled by the client"
		default:
			msg = oneLine(err.Error())
		}
		outcome = ledger.Outcome{OK: false, Err: msg, Latency: lat}
		result = errorResult(fmt.Sprintf("%s; the call was counted (step %q, %d of max_calls %d) and may or may not have run", msg, step.Name, t.Used, step.MaxCalls))
	default:
		r, perr := mcp.ParseCallToolResult(&res)
		if perr != nil {
			msg := "upstream answered an invalid tool result: " + oneLine(perr.Error())
			outcome = ledger.Outcome{OK: false, Err: msg, Latency: lat}
			result = errorResult(msg)
		} else {
			result = r
			outcome = ledger.Outcome{OK: !r.IsError, Latency: lat}
			if r.IsError {
				outcome.Err = "tool error: " + firstText(r)
			}
		}
	}
	if err := p.cfg.State.Complete(context.WithoutCancel(ctx), t, outcome); err != nil {
		fmt.Fprintf(p.cfg.Log, "planlock proxy: audit: %v\n", err)
	}
	if !outcome.OK && step.OnError == hclplan.ErrorHold {
		reason := fmt.Sprintf("step %q %s (%s)", step.Name, onErrorHeld, outcome.Err)
		p.heldMu.Lock()
		st.held[step.Index] = reason
		p.heldMu.Unlock()
		// The failed call's own hold keeps the step on hold across restarts;
		// approving it lets exactly that call run once more.
		if _, err := p.cfg.State.Hold(context.WithoutCancel(ctx), call, reason, p.cfg.Now().Add(p.cfg.HoldTTL)); err != nil {
			fmt.Fprintf(p.cfg.Log, "planlock proxy: audit: %v\n", err)
		}
	} else if outcome.OK {
		p.heldMu.Lock()
		delete(st.held, step.Index) // an approved call went through
		p.heldMu.Unlock()
	}
	return result
}

func firstText(r *mcp.CallToolResult) string {
	for _, c := range r.Content {
		if t, ok := c.(mcp.TextContent); ok {
			return oneLine(t.Text)
		}
	}
	return "(no text)"
}

// oneLine keeps a message to one short line.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 300 {
		s = string(r[:300]) + "…"
	}
	return s
}
