package ledger

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"time"
)

// planState is one plan digest's counts and order progress.
type planState struct {
	current int
	used    []int
	done    []bool
	held    []bool
	// leased is, per step, the call number up to which calls are durably
	// counted ahead (see Reserve); used <= leased while a lease is open.
	leased []int
	// leaseBatch is, per step, the batch carrying the newest lease record:
	// a call past leaseFrom waits for it to be durable; calls up to
	// leaseFrom are in the lease before it, durable when it was renewed
	// ahead. Not replayed (Open settles every lease).
	leaseBatch []*batch
	leaseFrom  []int
	// names are the step names seen, for the records of settled and
	// returned leases.
	names []string
}

func (p *planState) grow(i int) {
	for len(p.used) <= i {
		p.used = append(p.used, 0)
		p.done = append(p.done, false)
		p.held = append(p.held, false)
		p.leased = append(p.leased, 0)
		p.leaseBatch = append(p.leaseBatch, nil)
		p.leaseFrom = append(p.leaseFrom, 0)
		p.names = append(p.names, "")
	}
}

type holdKey struct{ plan, tool, argsSHA string }

// state is what the journal says; it has no lock of its own.
type state struct {
	plans  map[string]*planState
	holds  map[string]*Hold
	order  []string           // hold ids in creation order
	byKey  map[holdKey]string // newest hold per exact call
	newest map[string]time.Time
	// unverified are the approved holds whose approval was read back (from
	// the journal, a checkpoint, a segment or another replica's records),
	// not verified by this process: anyone who can append a record can
	// write one. Decisions read them as pending until the approval's
	// signature was verified again (UpdateHold to approved). Not part of
	// the checkpoint's state: every start begins with all of them.
	unverified map[string]bool
}

func newState() *state {
	return &state{
		plans:      map[string]*planState{},
		holds:      map[string]*Hold{},
		byKey:      map[holdKey]string{},
		newest:     map[string]time.Time{},
		unverified: map[string]bool{},
	}
}

// decided is h as a decision sees it at now: view, with an approval this
// process did not verify read as pending.
func (s *state) decided(h *Hold, now time.Time) Hold {
	v := view(h, now)
	if v.State == HoldApproved && s.unverified[h.ID] {
		v.State = HoldPending
	}
	return v
}

func (s *state) plan(digest string) *planState {
	p := s.plans[digest]
	if p == nil {
		p = &planState{}
		s.plans[digest] = p
	}
	return p
}

// apply replays one record. Records were checked when written, so apply
// only rebuilds; it never rejects.
func (s *state) apply(r *parsed) {
	switch r.Type {
	case typeDecision:
		switch r.Decision {
		case DecisionAllow:
			if r.StepIndex == nil || *r.StepIndex < 0 {
				return
			}
			i := *r.StepIndex
			p := s.plan(r.Plan)
			p.grow(i)
			p.used[i]++
			if r.Step != "" {
				p.names[i] = r.Step
			}
			p.current = max(p.current, i)
			if h := s.holds[r.Hold]; h != nil {
				h.State = HoldConsumed
				h.Updated = r.Time
				p.held[i] = false
			}
		case DecisionHold:
			if r.HoldState != HoldPending || r.Hold == "" {
				return // a repeat of an existing hold
			}
			h := &Hold{
				ID: r.Hold, PlanDigest: r.Plan, Step: r.Step, Tool: r.Tool,
				ArgsSHA256: r.ArgsSHA, Reason: r.Reason, Cause: r.Cause, ObservedPin: r.ObservedPin, RequestedBy: r.Caller, State: HoldPending,
				Created: r.Time, Updated: r.Time,
			}
			if r.StepIndex != nil {
				h.StepIndex = *r.StepIndex
			}
			if len(r.Args) > 0 {
				h.Args = append(json.RawMessage(nil), r.Args...)
			}
			if r.Expires != nil {
				h.Expires = *r.Expires
			}
			h.PRURL, h.PR = r.PRURL, prNumber(r.PR, r.PRURL)
			s.addHold(h)
		}
	case typeOutcome:
		if r.StepIndex == nil || *r.StepIndex < 0 {
			return
		}
		p := s.plan(r.Plan)
		p.grow(*r.StepIndex)
		if r.OK != nil && *r.OK {
			p.done[*r.StepIndex] = true
		}
		if r.HoldStep {
			p.held[*r.StepIndex] = true
		}
	case typeHoldUpdate:
		h := s.holds[r.Hold]
		if h == nil {
			return
		}
		if r.HoldState != "" {
			h.State = r.HoldState
			s.unverified[h.ID] = r.HoldState == HoldApproved
		}
		if r.ApprovalSHA != "" {
			h.ApprovalSHA256 = r.ApprovalSHA
		}
		if r.PRURL != "" {
			h.PRURL, h.PR = r.PRURL, prNumber(r.PR, r.PRURL)
		}
		h.Updated = r.Time
	case typeLease:
		if r.StepIndex == nil || *r.StepIndex < 0 {
			return
		}
		i := *r.StepIndex
		p := s.plan(r.Plan)
		p.grow(i)
		p.leased[i] = r.Through
		if r.Step != "" {
			p.names[i] = r.Step
		}
		// A lease settled after a crash counts its calls as used.
		p.used[i] = max(p.used[i], r.Used)
	case typeSegment:
		// The first record of a rotated journal's file: the state it
		// carries is the state of the records before it.
		var cp cpState
		if err := json.Unmarshal(r.State, &cp); err == nil {
			*s = *cp.state()
		}
	case typePlanLoaded:
		if r.SignedAt != nil {
			s.raise(r.PlanName, r.SignedPath, *r.SignedAt)
		}
	}
}

// raise moves the no-downgrade marks of a plan name and, when known, of its
// signed path up to signed.
func (s *state) raise(name, path string, signed time.Time) {
	if signed.After(s.newest[name]) {
		s.newest[name] = signed
	}
	if path != "" && signed.After(s.newest[pathMark(path)]) {
		s.newest[pathMark(path)] = signed
	}
}

func (s *state) addHold(h *Hold) {
	if _, dup := s.holds[h.ID]; !dup {
		s.order = append(s.order, h.ID)
	}
	s.holds[h.ID] = h
	s.byKey[holdKey{h.PlanDigest, h.Tool, h.ArgsSHA256}] = h.ID
	if h.State == HoldApproved {
		s.unverified[h.ID] = true // from a checkpoint or segment: read back
	}
}

// view returns a copy of h with its state as of now (pending or approved
// holds past their expiry read as expired).
func view(h *Hold, now time.Time) Hold {
	c := *h
	c.Args = slices.Clone(h.Args)
	if (c.State == HoldPending || c.State == HoldApproved) && !c.Expires.IsZero() && now.After(c.Expires) {
		c.State = HoldExpired
	}
	return c
}

func (s *state) progress(digest string) Progress {
	p := s.plans[digest]
	if p == nil {
		return Progress{}
	}
	// Two allocations, not three: this is on every call's path.
	flags := make([]bool, 0, len(p.done)+len(p.held))
	flags = append(append(flags, p.done...), p.held...)
	return Progress{Current: p.current, done: flags[:len(p.done):len(p.done)], used: slices.Clone(p.used), held: flags[len(p.done):]}
}

func (s *state) listHolds(now time.Time) []Hold {
	out := make([]Hold, 0, len(s.order))
	for _, id := range s.order {
		out = append(out, view(s.holds[id], now))
	}
	return out
}

// legacyPR finds the pull request number in a GitHub pull request URL.
var legacyPR = regexp.MustCompile(`/pull/([0-9]+)$`)

// prNumber is the pull request number a hold record carries. Journals
// written before the number was recorded, and writers that give only a URL,
// have it only in the URL: it is read from there once, when the record is
// replayed or written, and stored from then on.
func prNumber(pr int, url string) int {
	if pr != 0 || url == "" {
		return pr
	}
	m := legacyPR.FindStringSubmatch(url)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return 0
	}
	return n
}
