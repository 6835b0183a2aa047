package ledger

import (
	"context"
	"time"
)

// typeObserve records, in observe mode, what the plan would have decided
// for a call that was forwarded anyway. It is never replayed into the
// state: an observed call counts against no max_calls and moves no order.
const typeObserve = "observe"

// Would-be decisions of observe mode.
const (
	WouldAllow = "would_allow"
	WouldBlock = "would_block"
	WouldHold  = "would_hold"
)

// Observe records that a call was forwarded in observe mode and what the
// plan would have decided (WouldAllow, WouldBlock or WouldHold) and why.
// Its arguments are recorded as for any call (their digest when redacted).
// Like Block, it does not wait for disk.
func (l *Ledger) Observe(ctx context.Context, c Call, decision, reason string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return l.commitCallRecord(ctx, typeObserve, decision, c, reason)
}

// typeInput records the client's answers to the input requests of a
// multi-round call (MCP 2026-07-28), as they were forwarded to the
// upstream: ref is the seq of the call's allow record, args the answers
// (their digest when redacted, as any call's arguments). Like an observe
// record it is never replayed into the state: the call was counted once,
// by its allow record, and its outcome record ends it.
const typeInput = "input"

// Input records a multi-round call's answers (c.Args) to the call whose
// allow record is ref, and what they answer (reason). It does not wait for
// disk.
func (l *Ledger) Input(ctx context.Context, c Call, ref uint64, reason string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := record{Time: l.stamp(), Type: typeInput, Plan: c.PlanDigest, Step: c.Step, Tool: c.Tool, Caller: c.Caller,
		Ref: ref, Reason: firstLine(reason)}
	if c.Step != "" {
		r.StepIndex = &c.StepIndex
	}
	if err := argsFields(&r, c.Args, l.redact); err != nil {
		return err
	}
	return l.commit(ctx, &r, false, nil)
}

// Input records a multi-round call's answers, as Ledger.Input.
func (m *Machine) Input(c Call, ref uint64, reason string, now time.Time) error {
	r := record{Time: now.UTC(), Type: typeInput, Plan: c.PlanDigest, Step: c.Step, Tool: c.Tool, Caller: c.Caller,
		Ref: ref, Reason: firstLine(reason)}
	if c.Step != "" {
		idx := c.StepIndex
		r.StepIndex = &idx
	}
	if err := argsFields(&r, c.Args, m.redact); err != nil {
		return err
	}
	body, err := m.encode(&r)
	if err != nil {
		return err
	}
	m.append(body)
	return nil
}
