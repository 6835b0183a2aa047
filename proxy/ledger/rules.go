package ledger

import (
	"fmt"
	"strconv"
	"time"
)

// The at-most-once rules, once for both stores of the state: the journal
// file's Ledger and the shared state's Machine (pgstate) decide every
// change with these functions, and differ only in how the records reach
// storage (group commit, leases, transactions). The backend conformance
// suite (ledgertest) checks that they decide alike.

// checkReservation refuses a reservation no state could grant.
func checkReservation(rv *Reservation) error {
	switch {
	case rv.MaxCalls < 1:
		return fmt.Errorf("%w: max_calls %d < 1", ErrInvalidArgument, rv.MaxCalls)
	case rv.StepIndex < 0:
		return fmt.Errorf("%w: step index %d", ErrInvalidArgument, rv.StepIndex)
	case rv.OverLimit && rv.HoldID == "":
		return fmt.Errorf("%w: OverLimit needs an approved hold", ErrInvalidArgument)
	}
	return nil
}

// planView is the plan's state as a reservation's order check reads it,
// without a copy (valid only during the check).
func (s *state) planView(digest string) Progress {
	p := s.plans[digest]
	if p == nil {
		return Progress{}
	}
	return Progress{Current: p.current, done: p.done, used: p.used, held: p.held}
}

// admit applies a reservation's rules in the contract's order: the order
// check (with prog), then max_calls against taken (the calls of the step
// already counted), then the hold it consumes (argsSHA: the digest of its
// arguments), which it returns.
func (s *state) admit(rv *Reservation, prog Progress, taken int, argsSHA string, now time.Time) (*Hold, error) {
	if rv.Check != nil {
		if err := rv.Check(prog); err != nil {
			return nil, err
		}
	}
	if taken >= rv.MaxCalls && !rv.OverLimit {
		return nil, &ExhaustedError{PlanDigest: rv.PlanDigest, Step: rv.Step, Used: taken, Max: rv.MaxCalls}
	}
	if rv.HoldID == "" {
		return nil, nil
	}
	h := s.holds[rv.HoldID]
	switch {
	case h == nil:
		return nil, fmt.Errorf("%w %q", ErrUnknownHold, rv.HoldID)
	case h.PlanDigest != rv.PlanDigest || h.Tool != rv.Tool || h.ArgsSHA256 != argsSHA:
		return nil, fmt.Errorf("%w: hold %s approves another call", ErrHoldMismatch, rv.HoldID)
	}
	if st := s.decided(h, now).State; st != HoldApproved {
		return nil, fmt.Errorf("%w: hold %s is %s, not approved", ErrHoldState, rv.HoldID, st)
	}
	return h, nil
}

// take counts one call of the step that admit let through, consuming h
// (nil: none), which takes the step off hold.
func (s *state) take(rv *Reservation, h *Hold, now time.Time) {
	i := rv.StepIndex
	p := s.plan(rv.PlanDigest)
	p.grow(i)
	p.used[i]++
	p.names[i] = rv.Step
	p.current = max(p.current, i)
	if h != nil {
		h.State, h.Updated = HoldConsumed, now
		p.held[i] = false
	}
}

// allowBody encodes the allow record of a reservation, without its count
// (appendUsed adds it), and returns the digest of its arguments when it
// consumes a hold. Arguments the record refuses refuse the reservation
// before any rule is applied.
func allowBody(rv *Reservation, redact bool, now time.Time) ([]byte, string, error) {
	i := rv.StepIndex
	r := record{Time: now, Type: typeDecision, Decision: DecisionAllow, Plan: rv.PlanDigest,
		Step: rv.Step, StepIndex: &i, Tool: rv.Tool, Caller: rv.Caller, Hold: rv.HoldID, Max: rv.MaxCalls}
	if err := argsFields(&r, rv.Args, redact); err != nil {
		return nil, "", err
	}
	var sha string
	if rv.HoldID != "" {
		d, err := ArgsDigest(rv.Args)
		if err != nil {
			return nil, "", err
		}
		sha = d
	}
	body, err := encodeBody(&r)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	return body, sha, nil
}

// appendUsed ends an allow record's body with the call's number.
func appendUsed(body []byte, used int) []byte {
	body = append(body, `,"used":`...)
	return strconv.AppendInt(body, int64(used), 10)
}

// outcomeRecord is the record of a call's outcome at now.
func outcomeRecord(t Ticket, o Outcome, now time.Time) record {
	lat := o.Latency
	if lat == 0 && !t.At.IsZero() {
		lat = now.Sub(t.At)
	}
	ms := float64(lat.Microseconds()) / 1000
	ok := o.OK
	idx := t.StepIndex
	r := record{Time: now, Type: typeOutcome, Plan: t.PlanDigest, Step: t.Step, StepIndex: &idx,
		Tool: t.Tool, Ref: t.Seq, OK: &ok, LatencyMS: &ms, HoldStep: o.HoldStep}
	if !ok {
		r.Error = firstLine(o.Err)
		if r.Error == "" {
			r.Error = "failed"
		}
	}
	return r
}

// outcome applies a call's outcome: a success marks its step done, and
// o.HoldStep puts the step on hold.
func (s *state) outcome(t Ticket, o Outcome) {
	if t.StepIndex < 0 {
		return
	}
	p := s.plan(t.PlanDigest)
	p.grow(t.StepIndex)
	if o.OK {
		p.done[t.StepIndex] = true
	}
	if o.HoldStep {
		p.held[t.StepIndex] = true
	}
}

// callRecord is the record of a call that changes no count: a block, or
// an observed call (typ typeObserve, with decision a Would* one).
func callRecord(typ, decision string, c Call, reason string, redact bool, now time.Time) (record, error) {
	if typ == typeObserve {
		switch decision {
		case WouldAllow, WouldBlock, WouldHold:
		default:
			return record{}, fmt.Errorf("%w: observe decision %q", ErrInvalidArgument, decision)
		}
	}
	r := record{Time: now, Type: typ, Decision: decision, Plan: c.PlanDigest,
		Step: c.Step, Tool: c.Tool, Caller: c.Caller, Reason: firstLine(reason)}
	if c.Step != "" {
		idx := c.StepIndex
		r.StepIndex = &idx
	}
	return r, argsFields(&r, c.Args, redact)
}

// openHold is the hold a new held call refers to instead of making one:
// the pending or approved, unexpired hold for the same call whose cause
// covers spec's and that observed the same pin value; nil when there is
// none.
func (s *state) openHold(key holdKey, spec HoldSpec, now time.Time) *Hold {
	id, ok := s.byKey[key]
	if !ok {
		return nil
	}
	h := s.holds[id]
	if st := view(h, now).State; (st == HoldPending || st == HoldApproved) && CauseCovers(h.Cause, spec.Cause) && h.ObservedPin == spec.ObservedPin {
		return h
	}
	return nil
}

// holdAgainRecord is the hold decision that refers to the open hold h.
func holdAgainRecord(c Call, spec HoldSpec, h *Hold, now time.Time) record {
	idx := c.StepIndex
	return record{Time: now, Type: typeDecision, Decision: DecisionHold, Plan: c.PlanDigest,
		Step: c.Step, StepIndex: &idx, Tool: c.Tool, Caller: c.Caller, ArgsSHA: h.ArgsSHA256, Reason: firstLine(spec.Reason), Hold: h.ID}
}

// newHold is a new pending hold for a call (canon: its canonical
// arguments, sha their digest) and the record that makes it; the caller
// adds it to the state (addHold) once the record is encoded.
func newHold(c Call, spec HoldSpec, canon []byte, sha string, redact bool, now time.Time) (*Hold, record, error) {
	id, err := newHoldID()
	if err != nil {
		return nil, record{}, err
	}
	h := &Hold{ID: id, PlanDigest: c.PlanDigest, Step: c.Step, StepIndex: c.StepIndex, Tool: c.Tool,
		ArgsSHA256: sha, Reason: firstLine(spec.Reason), Cause: spec.Cause, ObservedPin: firstLine(spec.ObservedPin),
		RequestedBy: c.Caller, State: HoldPending, Created: now, Updated: now, Expires: spec.Expires.UTC()}
	if !redact {
		h.Args = canon
	}
	exp, idx := h.Expires, c.StepIndex
	r := record{Time: now, Type: typeDecision, Decision: DecisionHold, Plan: c.PlanDigest,
		Step: c.Step, StepIndex: &idx, Tool: c.Tool, Caller: c.Caller, Args: h.Args, ArgsSHA: sha,
		Reason: h.Reason, Hold: id, HoldState: HoldPending, Expires: &exp, Cause: h.Cause, ObservedPin: h.ObservedPin}
	return h, r, nil
}

// checkHoldUpdate refuses an update no hold can take.
func checkHoldUpdate(u HoldUpdate) error {
	if u.State != "" && u.State != HoldApproved && u.State != HoldRejected {
		return fmt.Errorf("%w: a hold can only be set to approved or rejected, not %q", ErrInvalidArgument, u.State)
	}
	return nil
}

// planLoad is a plan load as it is recorded (its signing time in UTC, a
// trust policy only with a path) and its record.
func planLoad(p PlanLoad, now time.Time) (PlanLoad, record, error) {
	if p.Name == "" || p.SignedAt.IsZero() {
		return p, record{}, fmt.Errorf("%w: a loaded plan needs a name and a signing time", ErrInvalidArgument)
	}
	signed := p.SignedAt.UTC()
	p.SignedAt = signed
	if p.Path == "" {
		p.Trust = "" // a trust policy keys a path's mark only
	}
	return p, record{Time: now, Type: typePlanLoaded, Plan: p.Digest, PlanName: p.Name, SignedAt: &signed, SignedPath: p.Path, SignedTrust: p.Trust, Note: firstLine(p.Note)}, nil
}

// loadPlan applies the no-downgrade rule to a plan load (from planLoad)
// and raises its mark.
func (s *state) loadPlan(p PlanLoad) error {
	if err := s.downgrade(p); err != nil {
		return err
	}
	s.raise(p, p.SignedAt)
	return nil
}
