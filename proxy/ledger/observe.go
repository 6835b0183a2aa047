package ledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
// (their digest when redacted, as any call's arguments), reason begins
// with the round ("round 2: ..."). It counts nothing: the call was counted
// once, by its allow record, and its outcome record ends it. The state
// keeps which rounds of which calls were answered, so that a round is
// answered once, whichever replica of a shared state sees its retry.
const typeInput = "input"

// ErrRoundAnswered: this round of the multi-round call was answered
// already (its retry was replayed, on this process or another replica).
var ErrRoundAnswered = errors.New("this round of the call was answered already")

// roundKey names one round of one multi-round call.
type roundKey struct {
	ref   uint64
	round int
}

// inputReason is the reason of an input record: its round, then what the
// answers answer.
func inputReason(round int, what string) string {
	return "round " + strconv.Itoa(round) + ": " + firstLine(what)
}

// roundOf reads the round back from an input record's reason.
func roundOf(reason string) (int, bool) {
	rest, ok := strings.CutPrefix(reason, "round ")
	if !ok {
		return 0, false
	}
	n, _, ok := strings.Cut(rest, ":")
	if !ok {
		return 0, false
	}
	round, err := strconv.Atoi(n)
	return round, err == nil && round > 0
}

// Input records a multi-round call's answers (c.Args) for round round of
// the call whose allow record is ref, and what they answer (what); the
// record is durable when Input returns. A round answered before is
// ErrRoundAnswered, and nothing is written.
func (l *Ledger) Input(ctx context.Context, c Call, ref uint64, round int, what string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r, err := inputRecord(c, ref, round, what, l.redact, l.stamp())
	if err != nil {
		return err
	}
	k := roundKey{ref, round}
	return l.commit(ctx, &r, true, func() error {
		if l.st.rounds[k] {
			return ErrRoundAnswered
		}
		l.st.rounds[k] = true
		return nil
	})
}

// Input records a multi-round call's answers, as Ledger.Input.
func (m *Machine) Input(c Call, ref uint64, round int, what string, now time.Time) error {
	k := roundKey{ref, round}
	if m.st.rounds[k] {
		return ErrRoundAnswered
	}
	r, err := inputRecord(c, ref, round, what, m.redact, now.UTC())
	if err != nil {
		return err
	}
	body, err := m.encode(&r)
	if err != nil {
		return err
	}
	m.append(body)
	m.st.rounds[k] = true
	return nil
}

func inputRecord(c Call, ref uint64, round int, what string, redact bool, now time.Time) (record, error) {
	if round <= 0 || ref == 0 {
		return record{}, fmt.Errorf("%w: an input record needs its call's allow record and a round from 1", ErrInvalidArgument)
	}
	r := record{Time: now, Type: typeInput, Plan: c.PlanDigest, Step: c.Step, Tool: c.Tool, Caller: c.Caller,
		Ref: ref, Reason: inputReason(round, what)}
	if c.Step != "" {
		idx := c.StepIndex
		r.StepIndex = &idx
	}
	if err := argsFields(&r, c.Args, redact); err != nil {
		return record{}, err
	}
	return r, nil
}
