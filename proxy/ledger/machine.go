package ledger

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// Machine is the ledger's rules and derived state without its storage, for
// a store that keeps the journal elsewhere (a database that several proxies
// share). It writes and reads the same records, chained and hashed the
// same way, as the journal file: Verify checks either, and a journal copied
// line by line yields the same state.
//
// The store serializes writers itself (every change is decided against a
// Machine that has applied every record before it), appends the lines the
// Machine's methods return, and, when an append fails or its outcome is
// unknown, discards the Machine and replays the stored records into a new
// one: the methods change the state before the records are stored. A
// Machine is not safe for concurrent use.
type Machine struct {
	st     *state
	seq    uint64
	head   string
	redact bool
	lines  [][]byte // appended since TakeLines
	// leases are the open replica leases by their record's seq (see LeaseReserve).
	leases map[uint64]*replicaLease
	// rule is the state key's rule over the records applied (nil: no MAC
	// checked, see UseStateKey); key MACs the records appended.
	rule *keyRule
	key  *StateKey
}

// UseStateKey makes the Machine decide under a state key, before any
// record is applied: every record it appends carries a MAC under key, and
// Apply refuses a record as a journal file's Open does (see StateKey); a
// nil key refuses records that carry a MAC. A Machine without it (one
// that only reads) checks no MAC.
func (m *Machine) UseStateKey(key *StateKey) {
	m.rule, m.key = newKeyRule(key), key
}

// CheckStateKey is the state key's rule once the stored records are
// applied (see Options.AcceptUnkeyedState); where names the state.
func (m *Machine) CheckStateKey(where string, accept bool) error {
	return m.rule.finish(where, accept)
}

// KeySwitchDue reports whether KeySwitch would append the record.
func (m *Machine) KeySwitchDue() bool { return m.rule.needsSwitch() }

// KeySwitch appends the state_key record, the first with a MAC, when the
// Machine decides under a state key and no record applied had one; it
// reports whether it did.
func (m *Machine) KeySwitch(now time.Time) bool {
	if !m.rule.needsSwitch() {
		return false
	}
	body, err := m.encode(&record{Time: now.UTC(), Type: typeStateKey, Note: stateKeyNote(m.key, m.rule.unkeyed)})
	if err != nil {
		return false // plain data: cannot happen
	}
	m.append(body)
	return true
}

// NewMachine returns the state of an empty journal; redact records the
// arguments' digest instead of the arguments.
func NewMachine(redact bool) *Machine {
	return &Machine{st: newState(), head: genesis, redact: redact}
}

// Head is the seq and hash of the last record applied or appended.
func (m *Machine) Head() Head { return Head{Seq: m.seq, Hash: m.head} }

// Apply checks one stored line (without its newline) against the chain
// (next seq, prev = head, own hash) and applies it.
func (m *Machine) Apply(line []byte) error {
	p, hash, reason := checkLine(line, m.seq+1, m.head, true, m.rule)
	if reason != "" {
		return &VerifyError{Line: int(m.seq + 1), Reason: reason}
	}
	switch {
	case p.Type == typeSegment:
		// A shared state is one chain from its first record: a segment
		// record (which replaces the whole state) has no place in it.
		return &VerifyError{Line: int(p.Seq), Reason: fmt.Sprintf("segment record %d in a journal that is not a rotated file: a segment record only starts a rotated journal's file, and its state is not taken", p.Seq)}
	default:
		if why := m.st.rederive(p, true); why != "" {
			return &VerifyError{Line: int(p.Seq), Reason: why}
		}
	}
	var taken int
	if p.Type == typeLease && p.Replica != "" && p.Ref == 0 && p.StepIndex != nil {
		taken = m.taken(p.Plan, *p.StepIndex)
	}
	m.st.apply(p)
	m.noteLease(&p.record, p.Seq, taken)
	m.seq, m.head = p.Seq, hash
	return nil
}

// TakeLines returns the lines appended since the last TakeLines (each
// without newline, in seq order); the store must write them all at once.
func (m *Machine) TakeLines() [][]byte {
	l := m.lines
	m.lines = nil
	return l
}

// append chains one record body and remembers its line.
func (m *Machine) append(body []byte) uint64 {
	m.seq++
	line, hash := appendKeyedLine(nil, m.seq, m.head, body, m.key)
	if m.key != nil && m.rule.keyed == 0 {
		m.rule.keyed = m.seq // the records after it must carry a MAC
	}
	m.lines = append(m.lines, line[:len(line)-1])
	m.head = hash
	return m.seq
}

// StateDigest is the sha256 of the derived state (counts, order, holds,
// high-water marks) as a checkpoint would store it: two journals with the
// same digest give the same decisions.
func (m *Machine) StateDigest() (string, error) {
	return stateDigest(m.st)
}

func stateDigest(s *state) (string, error) {
	cp := s.checkpoint()
	for d, p := range cp.Plans {
		p.Leased = nil // lease bookkeeping is the file store's, not a decision
		cp.Plans[d] = p
	}
	b, err := json.Marshal(cp)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

func (m *Machine) encode(r *record) ([]byte, error) {
	b, err := encodeBody(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	return b, nil
}

// Reserve takes one call of the step as Ledger.Reserve does, counted alone
// (no leases: the store commits it before the call is forwarded). Its order
// check gets the counts Progress reports (other replicas' open leases taken).
func (m *Machine) Reserve(rv Reservation, now time.Time) (Ticket, error) {
	if err := checkReservation(&rv); err != nil {
		return Ticket{}, err
	}
	now = now.UTC()
	body, argsSHA, err := allowBody(&rv, m.redact, now)
	if err != nil {
		return Ticket{}, err
	}
	var prog Progress
	if rv.Check != nil {
		prog = m.Progress(rv.PlanDigest)
	}
	// Calls other replicas' open leases cover are taken too.
	taken := m.taken(rv.PlanDigest, rv.StepIndex)
	h, err := m.st.admit(&rv, prog, taken, argsSHA, now)
	if err != nil {
		return Ticket{}, err
	}
	m.st.take(&rv, h, now)
	seq := m.append(appendUsed(body, taken+1))
	return Ticket{Seq: seq, PlanDigest: rv.PlanDigest, Step: rv.Step, StepIndex: rv.StepIndex, Tool: rv.Tool, Used: taken + 1, At: now}, nil
}

// Complete records the upstream's outcome, as Ledger.Complete.
func (m *Machine) Complete(t Ticket, o Outcome, now time.Time) error {
	r := outcomeRecord(t, o, now.UTC())
	body, err := m.encode(&r)
	if err != nil {
		return err
	}
	m.st.outcome(t, o)
	m.append(body)
	return nil
}

// Block records a blocked call.
func (m *Machine) Block(c Call, reason string, now time.Time) error {
	return m.callRecord(typeDecision, DecisionBlock, c, reason, now)
}

// Observe records an observed call (see Ledger.Observe).
func (m *Machine) Observe(c Call, decision, reason string, now time.Time) error {
	return m.callRecord(typeObserve, decision, c, reason, now)
}

func (m *Machine) callRecord(typ, decision string, c Call, reason string, now time.Time) error {
	r, err := callRecord(typ, decision, c, reason, m.redact, now.UTC())
	if err != nil {
		return err
	}
	body, err := m.encode(&r)
	if err != nil {
		return err
	}
	m.append(body)
	return nil
}

// NewHold records a held call, as Ledger.NewHold (an open hold for the same
// call is found again).
func (m *Machine) NewHold(c Call, spec HoldSpec, now time.Time) (Hold, error) {
	now = now.UTC()
	canon, err := CanonicalArgs(c.Args)
	if err != nil {
		return Hold{}, err
	}
	sha, _ := ArgsDigest(canon)
	if h := m.st.openHold(holdKey{c.PlanDigest, c.Tool, sha}, spec, now); h != nil {
		r := holdAgainRecord(c, spec, h, now)
		body, err := m.encode(&r)
		if err != nil {
			return Hold{}, err
		}
		m.append(body)
		return m.st.decided(h, now), nil
	}
	h, r, err := newHold(c, spec, canon, sha, m.redact, now)
	if err != nil {
		return Hold{}, err
	}
	body, err := m.encode(&r)
	if err != nil {
		return Hold{}, err
	}
	m.st.addHold(h)
	m.append(body)
	return view(h, now), nil
}

// UpdateHold approves or rejects a pending hold and/or sets its PR URL.
func (m *Machine) UpdateHold(id string, u HoldUpdate, now time.Time) (Hold, error) {
	if err := checkHoldUpdate(u); err != nil {
		return Hold{}, err
	}
	now = now.UTC()
	h := m.st.holds[id]
	if h == nil {
		return Hold{}, fmt.Errorf("%w %q", ErrUnknownHold, id)
	}
	r, err := m.st.holdUpdate(h, u, now)
	if err != nil {
		return Hold{}, err
	}
	body, err := m.encode(&r)
	if err != nil {
		return Hold{}, err
	}
	m.st.setHold(h, u, &r, now)
	m.append(body)
	return m.st.decided(h, now), nil
}

// LoadPlan applies the no-downgrade rule and records the load.
func (m *Machine) LoadPlan(p PlanLoad, now time.Time) error {
	p, r, err := planLoad(p, now.UTC())
	if err != nil {
		return err
	}
	body, err := m.encode(&r)
	if err != nil {
		return err
	}
	if err := m.st.loadPlan(p); err != nil {
		return err
	}
	m.append(body)
	return nil
}

// Progress returns a copy of the plan's order state and counts. Calls
// counts, besides the calls recorded, those open replica leases cover and
// have not recorded yet: taken, whether forwarded yet or not.
func (m *Machine) Progress(planDigest string) Progress {
	p := m.st.progress(planDigest)
	for _, l := range m.leases {
		if l.plan != planDigest {
			continue
		}
		for len(p.used) <= l.idx {
			p.used = append(p.used, 0)
		}
		p.used[l.idx] += l.size - l.recorded
	}
	return p
}

// ListHolds returns all holds in creation order, as of now.
func (m *Machine) ListHolds(now time.Time) []Hold { return m.st.listHolds(now) }

// GetHold returns a hold by id.
func (m *Machine) GetHold(id string, now time.Time) (Hold, bool) {
	h := m.st.holds[id]
	if h == nil {
		return Hold{}, false
	}
	return m.st.decided(h, now), true
}

// FindHold returns the newest hold for exactly this call.
func (m *Machine) FindHold(c Call, now time.Time) (Hold, bool) {
	sha, err := ArgsDigest(c.Args)
	if err != nil {
		return Hold{}, false
	}
	id, ok := m.st.byKey[holdKey{c.PlanDigest, c.Tool, sha}]
	if !ok {
		return Hold{}, false
	}
	return m.st.decided(m.st.holds[id], now), true
}

// Newest is the newest signing time loaded for a plan name.
func (m *Machine) Newest(planName string) (time.Time, bool) {
	t, ok := m.st.newest[planName]
	return t, ok
}

// JournalLines calls fn with each line (without newline) of a journal
// read from data, after Verify checked it whole.
func JournalLines(data []byte, fn func(line []byte) error) error {
	if _, err := Verify(bytes.NewReader(data)); err != nil {
		return err
	}
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if err := fn(data[:i]); err != nil {
			return err
		}
		data = data[i+1:]
	}
	return nil
}

// StateDigest of a Snapshot, comparable with Machine.StateDigest.
func (s *Snapshot) StateDigest() (string, error) { return stateDigest(s.st) }

// Snapshot is a read-only copy of the Machine's state as of now, named
// name (what Snapshot.AuditPath returns), for the commands that read a
// state (planlock holds list).
func (m *Machine) Snapshot(name string, now time.Time) *Snapshot {
	cp := m.st.checkpoint()
	return &Snapshot{st: cp.state(), now: now, auditPath: name, Records: int(m.seq)}
}
