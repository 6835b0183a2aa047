package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Hold records a held call with no recorded cause; see NewHold.
func (l *Ledger) Hold(ctx context.Context, c Call, reason string, expires time.Time) (Hold, error) {
	return l.NewHold(ctx, c, HoldSpec{Reason: reason, Expires: expires})
}

// NewHold records a held call. If a pending or approved, unexpired hold
// exists for the same call (plan digest, tool, canonical arguments) whose
// cause covers spec.Cause and that observed the same pin value, the decision
// refers to it and it is returned (an approved one is for the caller to
// consume with Reserve); otherwise a new pending hold is created, durable on
// return, and becomes the call's hold.
// Its arguments are kept in canonical form (only their digest when redacted).
func (l *Ledger) NewHold(ctx context.Context, c Call, spec HoldSpec) (Hold, error) {
	canon, err := CanonicalArgs(c.Args)
	if err != nil {
		return Hold{}, err
	}
	sha, _ := ArgsDigest(canon)
	now := l.stamp()
	out, b, err := l.newHold(c, spec, holdKey{c.PlanDigest, c.Tool, sha}, canon, now)
	if err != nil {
		return Hold{}, err
	}
	l.writeQueued()
	if b != nil {
		if err := wait(ctx, b); err != nil {
			return Hold{}, err
		}
	}
	return out, nil
}

// newHold is NewHold's locked step. It returns the hold and, for a new one,
// the batch that makes it durable (nil when an existing hold is reused).
func (l *Ledger) newHold(c Call, spec HoldSpec, key holdKey, canon []byte, now time.Time) (Hold, *batch, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return Hold{}, nil, err
	}
	if h := l.st.openHold(key, spec, now); h != nil {
		r := holdAgainRecord(c, spec, h, now)
		body, err := encodeBody(&r)
		if err != nil {
			return Hold{}, nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
		}
		l.enqueueLocked(body, false)
		return l.st.decided(h, now), nil, nil
	}
	h, r, err := newHold(c, spec, canon, key.argsSHA, l.redact, now)
	if err != nil {
		return Hold{}, nil, err
	}
	body, err := encodeBody(&r)
	if err != nil {
		return Hold{}, nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	l.st.addHold(h)
	_, b := l.enqueueLocked(body, true)
	return view(h, now), b, nil
}

// CauseCovers reports whether the comma-separated cause set have includes
// every element of want. An empty set reads as "approval": a hold recorded
// before causes were, stands for an approval and nothing more.
func CauseCovers(have, want string) bool {
	if have == "" {
		have = "approval"
	}
	if want == "" {
		want = "approval"
	}
	set := strings.Split(have, ",")
	for _, w := range strings.Split(want, ",") {
		if !slices.Contains(set, w) {
			return false
		}
	}
	return true
}

// UpdateHold approves or rejects a pending hold and/or sets its pull
// request's URL. It returns the hold as updated, durable on return.
func (l *Ledger) UpdateHold(ctx context.Context, id string, u HoldUpdate) (Hold, error) {
	if err := checkHoldUpdate(u); err != nil {
		return Hold{}, err
	}
	out, b, err := l.updateHold(id, u, l.stamp())
	if err != nil {
		return Hold{}, err
	}
	l.writeQueued()
	if err := wait(ctx, b); err != nil {
		return Hold{}, err
	}
	return out, nil
}

// updateHold is UpdateHold's locked step.
func (l *Ledger) updateHold(id string, u HoldUpdate, now time.Time) (Hold, *batch, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return Hold{}, nil, err
	}
	h := l.st.holds[id]
	if h == nil {
		return Hold{}, nil, fmt.Errorf("%w %q", ErrUnknownHold, id)
	}
	r, err := l.st.holdUpdate(h, u, now)
	if err != nil {
		return Hold{}, nil, err
	}
	body, err := encodeBody(&r)
	if err != nil {
		return Hold{}, nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	l.st.setHold(h, u, &r, now)
	_, b := l.enqueueLocked(body, true)
	return l.st.decided(h, now), b, nil
}

// GetHold returns a hold by id.
func (l *Ledger) GetHold(id string) (Hold, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.st.holds[id]
	if h == nil {
		return Hold{}, false
	}
	return l.st.decided(h, l.stamp()), true
}

// FindHold returns the newest hold for exactly this call (plan digest, tool,
// canonical arguments), whatever its state.
func (l *Ledger) FindHold(c Call) (Hold, bool) {
	sha, err := ArgsDigest(c.Args)
	if err != nil {
		return Hold{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	id, ok := l.st.byKey[holdKey{c.PlanDigest, c.Tool, sha}]
	if !ok {
		return Hold{}, false
	}
	return l.st.decided(l.st.holds[id], l.stamp()), true
}

// ListHolds returns all holds in creation order.
func (l *Ledger) ListHolds() []Hold {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st.listHolds(l.stamp())
}

func newHoldID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("hold id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// holdUpdate checks u against h and returns its record. A hold whose
// approval was read back and not verified here reads as pending: the
// approval verified again is recorded once more.
func (s *state) holdUpdate(h *Hold, u HoldUpdate, now time.Time) (record, error) {
	if st := s.decided(h, now).State; u.State != "" && st != HoldPending {
		return record{}, fmt.Errorf("%w: hold %s is %s; only a pending hold can be %s", ErrHoldState, h.ID, st, u.State)
	}
	if u.State != HoldApproved && u.Evidence != "" {
		return record{}, fmt.Errorf("%w: approval evidence without an approval", ErrInvalidArgument)
	}
	return record{Time: now, Type: typeHoldUpdate, Plan: h.PlanDigest, Step: h.Step, Tool: h.Tool,
		Hold: h.ID, HoldState: u.State, PRURL: u.PRURL, PR: prNumber(u.PR, u.PRURL), Note: firstLine(u.Note), ApprovalSHA: u.Evidence}, nil
}

// setHold applies an update this process decided (and, for an approval,
// verified): the hold's approval is no longer one read back.
func (s *state) setHold(h *Hold, u HoldUpdate, r *record, now time.Time) {
	if u.State != "" {
		h.State = u.State
		delete(s.unverified, h.ID)
	}
	if u.Evidence != "" {
		h.ApprovalSHA256 = u.Evidence
	}
	if u.PRURL != "" {
		h.PRURL, h.PR = u.PRURL, r.PR
	}
	h.Updated = now
}
