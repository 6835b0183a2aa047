package ledger

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
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
	// rounds are the rounds of multi-round calls answered (input records):
	// each is answered once. Not part of the checkpoint's state (a round is
	// good for minutes, as its requestState), so rounds answered before the
	// last checkpoint are not known after it.
	rounds map[roundKey]bool
}

func newState() *state {
	return &state{
		plans:      map[string]*planState{},
		holds:      map[string]*Hold{},
		byKey:      map[holdKey]string{},
		newest:     map[string]time.Time{},
		unverified: map[string]bool{},
		rounds:     map[roundKey]bool{},
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
	case typeInput:
		if round, ok := roundOf(r.Reason); ok && r.Ref != 0 {
			s.rounds[roundKey{r.Ref, round}] = true
		}
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
			s.raise(PlanLoad{Name: r.PlanName, Path: r.SignedPath, Trust: r.SignedTrust}, *r.SignedAt)
		}
	}
}

// pathMark is the key of a signed path's high-water mark in state.newest
// as recorded before marks named their trust policy; signedMark is the key
// since. A plan name has no ':' (hclplan), so neither collides with a
// name's mark, and checkpoints carry all of them unchanged.
func pathMark(path string) string { return "path:" + path }

func signedMark(trust, path string) string { return "signed:" + trust + ":" + path }

// raise moves the no-downgrade marks of a load up to signed: the mark of
// its signed path under its trust policy; a load recorded without a trust
// policy raises what it always did (its name's and its path's), so that
// replaying a journal written before gives the same state.
func (s *state) raise(p PlanLoad, signed time.Time) {
	up := func(k string) {
		if signed.After(s.newest[k]) {
			s.newest[k] = signed
		}
	}
	switch {
	case p.Trust != "" && p.Path != "":
		up(signedMark(p.Trust, p.Path))
	case p.Path != "":
		up(p.Name)
		up(pathMark(p.Path))
	default:
		up(p.Name)
	}
}

// mark is the newest signing time that binds p: for a signed path, the
// path's mark under p's trust policy and the path's mark recorded without
// one (it binds every policy); the plan's label plays no part. A load
// without a signed path has its name's mark.
func (s *state) mark(p PlanLoad) (time.Time, bool) {
	if p.Path == "" {
		t, ok := s.newest[p.Name]
		return t, ok
	}
	t, ok := s.newest[pathMark(p.Path)]
	if p.Trust != "" {
		if u, uok := s.newest[signedMark(p.Trust, p.Path)]; uok && (!ok || u.After(t)) {
			t, ok = u, true
		}
	}
	return t, ok
}

// downgrade returns a *DowngradeError when p was signed before its mark.
func (s *state) downgrade(p PlanLoad) error {
	newest, ok := s.mark(p)
	if !ok || !p.SignedAt.Before(newest) {
		return nil
	}
	if p.Path == "" {
		return &DowngradeError{Name: p.Name, SignedAt: p.SignedAt, Newest: newest}
	}
	return &DowngradeError{Name: p.Name, Path: p.Path, SignedAt: p.SignedAt, Newest: newest}
}

// signedPaths are the repository paths the state holds a mark for, under
// any trust policy.
func (s *state) signedPaths() []string {
	seen := map[string]bool{}
	var out []string
	for k := range s.newest {
		var path string
		if rest, ok := strings.CutPrefix(k, "path:"); ok {
			path = rest
		} else if rest, ok := strings.CutPrefix(k, "signed:"); ok {
			// "signed:<kind>:<id>:<path>": the policy's fingerprint is
			// "key:sha256:<hex>" or "keyless:<hex>".
			parts := strings.SplitN(rest, ":", 4)
			switch {
			case len(parts) == 4 && parts[0] == "key":
				path = parts[3]
			case len(parts) >= 3 && parts[0] == "keyless":
				path = strings.Join(parts[2:], ":")
			default:
				continue
			}
		} else {
			continue
		}
		if !seen[path] {
			seen[path] = true
			out = append(out, path)
		}
	}
	slices.Sort(out)
	return out
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
