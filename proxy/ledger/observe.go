package ledger

import "context"

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
