package ledger

import (
	"fmt"
	"slices"
	"time"
)

// Leases of a shared state. Several proxies (replicas) decide against one
// chain; a replica can count the next calls of a step ahead in one lease
// record, forward them without a round trip of its own, and append their
// allow records later (each refers to its lease by "ref"). Unlike the
// file ledger's lease, which is the one process's high-water mark, a
// replica's lease is a share of the step's calls: the calls taken of a step
// are the allow records plus what every open lease has not yet recorded, so
// no replica can grant a call another replica's lease covers.
//
// A lease is open until all its calls are recorded, or a lease record that
// refers to it closes it: returned by its replica (the calls it did not
// forward are given back), or settled as used by any replica once it is
// past its expiry (its replica is presumed dead: the calls it covered may
// have been forwarded with their records lost, so they count as used, as the
// file ledger's crash rule counts an unclosed lease).

// LeaseGrant is a lease a replica took: call numbers First..Through of the
// step are its to forward until Expires.
type LeaseGrant struct {
	Seq        uint64 // the lease record's seq
	PlanDigest string
	Step       string
	StepIndex  int
	Tool       string
	MaxCalls   int
	First      int
	Through    int
	Expires    time.Time
}

// replicaLease is an open lease of the shared state.
type replicaLease struct {
	plan     string
	idx      int
	step     string
	replica  string
	expires  time.Time
	size     int
	recorded int
}

// taken is the number of calls of a step counted: forwarded, or covered by
// an open lease and not yet recorded.
func (m *Machine) taken(plan string, i int) int {
	n := 0
	if p := m.st.plans[plan]; p != nil && i < len(p.used) {
		n = p.used[i]
	}
	for _, l := range m.leases {
		if l.plan == plan && l.idx == i {
			n += l.size - l.recorded
		}
	}
	return n
}

// noteLease follows the replica leases through a record just applied or
// appended (seq is the record's); taken must already count the calls
// before it.
func (m *Machine) noteLease(r *record, seq uint64, takenBefore int) {
	switch {
	case r.Type == typeLease && r.Replica != "" && r.Ref == 0 && r.StepIndex != nil:
		if m.leases == nil {
			m.leases = map[uint64]*replicaLease{}
		}
		l := &replicaLease{plan: r.Plan, idx: *r.StepIndex, step: r.Step, replica: r.Replica, size: r.Through - takenBefore}
		if r.Expires != nil {
			l.expires = *r.Expires
		}
		if l.size > 0 {
			m.leases[seq] = l
		}
	case r.Type == typeLease && r.Ref != 0:
		delete(m.leases, r.Ref)
	case r.Type == typeDecision && r.Decision == DecisionAllow && r.Ref != 0:
		if l := m.leases[r.Ref]; l != nil {
			if l.recorded++; l.recorded >= l.size {
				delete(m.leases, r.Ref)
			}
		}
	}
}

// LeaseReserve takes one call of the step as Reserve does and, when the
// step has enough calls left (the file ledger's rule: 1% of what is left,
// at most 256, none below 200 left), a lease for replica on the calls after
// it, valid for ttl: the lease record and the first call's allow record
// are appended together. A call that consumes a hold is never leased. The
// returned grant is zero when no lease was taken.
func (m *Machine) LeaseReserve(rv Reservation, replica string, ttl time.Duration, now time.Time) (Ticket, LeaseGrant, error) {
	g, err := m.Lease(rv, replica, ttl, now)
	if err != nil || g.Seq == 0 {
		if err == nil {
			var t Ticket
			t, err = m.Reserve(rv, now)
			return t, LeaseGrant{}, err
		}
		return Ticket{}, LeaseGrant{}, err
	}
	t, err := m.RecordLeased(g, rv.Call, g.First, now)
	if err != nil {
		return Ticket{}, LeaseGrant{}, err
	}
	return t, g, nil
}

// Lease appends a lease record for replica on the next calls of rv's
// step (see LeaseReserve), without taking a call: a replica takes its next
// lease before the current one is used up. The grant is zero (and nothing
// appended) when the step has too few calls left for a lease, or rv
// consumes a hold.
func (m *Machine) Lease(rv Reservation, replica string, ttl time.Duration, now time.Time) (LeaseGrant, error) {
	if rv.HoldID != "" || rv.OverLimit || replica == "" || rv.MaxCalls < 1 || rv.StepIndex < 0 {
		return LeaseGrant{}, nil
	}
	taken := m.taken(rv.PlanDigest, rv.StepIndex)
	k := leaseSize(rv.MaxCalls, taken)
	if k < 2 {
		return LeaseGrant{}, nil
	}
	now = now.UTC()
	if rv.Check != nil {
		if err := rv.Check(m.Progress(rv.PlanDigest)); err != nil {
			return LeaseGrant{}, err
		}
	}
	i := rv.StepIndex
	exp := now.Add(ttl)
	lr := record{Time: now, Type: typeLease, Plan: rv.PlanDigest, Step: rv.Step, StepIndex: &i, Tool: rv.Tool,
		Expires: &exp, Max: rv.MaxCalls, Through: taken + k, Replica: replica,
		Note: fmt.Sprintf("calls %d to %d counted ahead for replica %s", taken+1, taken+k, replica)}
	body, err := m.encode(&lr)
	if err != nil {
		return LeaseGrant{}, err
	}
	pp := m.st.plan(rv.PlanDigest)
	pp.grow(i)
	pp.leased[i], pp.names[i] = lr.Through, rv.Step
	seq := m.append(body)
	m.noteLease(&lr, seq, taken)
	return LeaseGrant{Seq: seq, PlanDigest: rv.PlanDigest, Step: rv.Step, StepIndex: i, Tool: rv.Tool,
		MaxCalls: rv.MaxCalls, First: taken + 1, Through: taken + k, Expires: exp}, nil
}

// RecordLeased appends the allow record of call number n of lease g, a
// call the replica already forwarded (or is about to): nothing is decided.
func (m *Machine) RecordLeased(g LeaseGrant, c Call, n int, now time.Time) (Ticket, error) {
	now = now.UTC()
	i := g.StepIndex
	r := record{Time: now, Type: typeDecision, Decision: DecisionAllow, Plan: g.PlanDigest,
		Step: g.Step, StepIndex: &i, Tool: c.Tool, Max: g.MaxCalls, Ref: g.Seq}
	if err := argsFields(&r, c.Args, m.redact); err != nil {
		return Ticket{}, err
	}
	r.Used = n // the call's number within the step
	body, err := m.encode(&r)
	if err != nil {
		return Ticket{}, err
	}
	pp := m.st.plan(g.PlanDigest)
	pp.grow(i)
	pp.used[i]++
	pp.names[i] = g.Step
	pp.current = max(pp.current, i)
	seq := m.append(body)
	m.noteLease(&r, seq, 0)
	return Ticket{Seq: seq, PlanDigest: g.PlanDigest, Step: g.Step, StepIndex: i, Tool: c.Tool, Used: n, At: now}, nil
}

// SettleLeases closes open leases with a lease record each, in the order
// they were granted. With replica set, it returns that replica's leases
// (it stops: the calls it did not record were not forwarded and are given
// back); with replica empty, it settles every lease past its expiry as
// used (its replica is presumed dead). It returns how many it closed.
func (m *Machine) SettleLeases(replica string, now time.Time) (int, error) {
	now = now.UTC()
	seqs := make([]uint64, 0, len(m.leases))
	for seq, l := range m.leases {
		if (replica != "" && l.replica == replica) || (replica == "" && now.After(l.expires)) {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	for _, seq := range seqs {
		if err := m.closeLease(seq, replica != "", now); err != nil {
			return 0, err
		}
	}
	return len(seqs), nil
}

// ReturnLease gives back the calls of the lease of record seq that were not
// recorded: its replica will not forward them. A lease no longer open is
// left alone.
func (m *Machine) ReturnLease(seq uint64, now time.Time) error {
	if m.leases[seq] == nil {
		return nil
	}
	return m.closeLease(seq, true, now.UTC())
}

func (m *Machine) closeLease(seq uint64, returned bool, now time.Time) error {
	l := m.leases[seq]
	left := l.size - l.recorded
	idx := l.idx
	pp := m.st.plan(l.plan)
	pp.grow(idx)
	r := record{Time: now, Type: typeLease, Plan: l.plan, Step: l.step, StepIndex: &idx, Ref: seq,
		Through: max(pp.leased[idx], 1), Replica: l.replica}
	if returned {
		r.Note = fmt.Sprintf("%d leased calls returned by replica %s", left, l.replica)
	} else {
		r.Used = pp.used[idx] + left
		r.Note = fmt.Sprintf("lease settled: the lease of replica %s expired at %s with %d calls not recorded; they count as used",
			l.replica, l.expires.Format(time.RFC3339), left)
	}
	body, err := m.encode(&r)
	if err != nil {
		return err
	}
	pp.leased[idx] = r.Through
	pp.used[idx] = max(pp.used[idx], r.Used)
	s := m.append(body)
	m.noteLease(&r, s, 0)
	return nil
}

// OpenLeases is the number of leases not yet fully recorded, returned or
// settled.
func (m *Machine) OpenLeases() int { return len(m.leases) }
