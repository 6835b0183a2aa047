package pgstate

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"time"

	"github.com/planlock/planlock/proxy/ledger"
)

// Leases. For a step with at least 200 calls left, the transaction that
// counts a call also counts the next ones (1% of what is left, at most 256)
// as this replica's lease, in one lease record (ledger.Machine.LeaseReserve).
// Calls inside the lease need no transaction of their own: their allow
// records are appended by the writer with the next batch, one transaction
// for all that queued meanwhile, and each call is forwarded once that batch
// committed (a failed batch refuses its calls, so no forwarded call lacks
// its allow record). Their outcomes are posted to the next batch and
// retried until they commit. Every
// replica counts another's open lease as taken, so max_calls holds across
// replicas whatever happens to the records of leased calls.
//
// A lease carries its replica and an expiry (LeaseTTL). The replica uses it
// for the first half of that time and then returns what is left, as it does
// at Close. A replica that dies cannot: past the expiry, the next
// transaction of any replica (or a replica's start) appends a lease record
// that settles the lease, counting its calls never recorded as used: they
// may have been forwarded with their records lost in the dead process, so
// at most once holds, as for the file ledger's crash rule.

type stepKey struct {
	plan string
	idx  int
}

type callKey struct {
	plan string
	idx  int
	n    int
}

// grant is a lease this replica holds.
type grant struct {
	g        ledger.LeaseGrant
	next     int       // the next call number to hand out
	useUntil time.Time // by this replica's clock; half the lease's time
	failures uint64    // Store.failures when granted
	// spare is the next lease, taken once half of this one is used, so
	// that calls do not wait for a transaction when this one runs out.
	spare    *grant
	fetching bool
	prog     ledger.Progress
}

func replicaID() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// How long the records of leased calls may wait for their transaction, and
// how many make one at once.
const (
	postFlush = 10 * time.Millisecond
	postBatch = 512
)

// post queues a change that nobody waits for (a lease's fetch or return);
// the writer appends it with the next transaction, within postFlush.
func (s *Store) post(fn func(m *ledger.Machine, now time.Time) error) {
	s.postOp(&op{fn: fn})
}

// postRetry posts the record of a call already forwarded (its outcome): a
// failed transaction queues it again (op.retry).
func (s *Store) postRetry(fn func(m *ledger.Machine, now time.Time) error) {
	s.postOp(&op{fn: fn, retry: true})
}

func (s *Store) postOp(o *op) {
	s.qmu.Lock()
	if s.closed {
		s.qmu.Unlock()
		return
	}
	s.queue = append(s.queue, o)
	n := len(s.queue)
	s.qmu.Unlock()
	if n >= postBatch {
		s.signal()
	}
}

// take hands out the next call of a usable lease for rv; lmu held. A lease
// past its use is dropped and what is left of it returned.
func (s *Store) take(rv ledger.Reservation, now time.Time) (*grant, int) {
	k := stepKey{rv.PlanDigest, rv.StepIndex}
	gr := s.grants[k]
	if gr == nil || s.leaseOff {
		return nil, 0
	}
	if gr.next > gr.g.Through && gr.spare != nil {
		gr = gr.spare // the used-up lease needs no return
		s.grants[k] = gr
	}
	if gr.next > gr.g.Through || !now.Before(gr.useUntil) || gr.g.MaxCalls != rv.MaxCalls {
		s.dropLocked(k)
		return nil, 0
	}
	n := gr.next
	gr.next++
	if size := gr.g.Through - gr.g.First + 1; !gr.fetching && gr.spare == nil && gr.g.Through-n < size/2 {
		gr.fetching = true
		s.prefetch(k, gr, rv)
	}
	return gr, n
}

// prefetch queues the transaction that takes gr's spare lease; lmu held.
func (s *Store) prefetch(k stepKey, gr *grant, rv ledger.Reservation) {
	rv.Check = nil // the order rule is checked for each call inside the lease
	s.post(func(m *ledger.Machine, now time.Time) error {
		g, err := m.Lease(rv, s.replica, s.leaseTTL, now)
		s.lmu.Lock()
		defer s.lmu.Unlock()
		gr.fetching = false
		if err != nil || g.Seq == 0 {
			return nil
		}
		if s.leaseOff || s.grants[k] != gr || gr.spare != nil {
			return m.ReturnLease(g.Seq, now) // not needed after all
		}
		gr.spare = &grant{g: g, next: g.First, useUntil: s.now().Add(s.leaseTTL / 2), prog: m.Progress(g.PlanDigest), failures: s.failures}
		return nil
	})
	s.signal() // now, not at the next flush: the lease may run out first
}

// leased decides rv inside a lease of this replica, when it has one: ok
// reports whether it decided; with a nil error the call may be forwarded
// once o, its allow record, has committed.
func (s *Store) leased(rv ledger.Reservation) (ledger.Ticket, *op, bool, error) {
	// Refused arguments take no call of the lease: its allow record could
	// not be appended.
	if err := ledger.CheckArgs(rv.Args, s.redact); err != nil {
		return ledger.Ticket{}, nil, true, err
	}
	now := s.now()
	s.lmu.Lock()
	defer s.lmu.Unlock()
	gr := s.grants[stepKey{rv.PlanDigest, rv.StepIndex}]
	if gr != nil && rv.Check != nil && now.Before(gr.useUntil) {
		// The order rule against this replica's newest view of the chain,
		// refreshed by every transaction.
		if err := rv.Check(s.localLocked(rv.PlanDigest, gr.prog)); err != nil {
			return ledger.Ticket{}, nil, true, err
		}
	}
	gr, n := s.take(rv, now)
	if gr == nil {
		return ledger.Ticket{}, nil, false, nil
	}
	g, c := gr.g, rv.Call
	// Queued under lmu, so a return of this lease queues after it.
	o := &op{done: make(chan struct{}), deadline: time.Now().Add(s.timeout), fn: func(m *ledger.Machine, now time.Time) error {
		t, err := m.RecordLeased(g, c, n, now)
		if err == nil {
			s.sent[callKey{g.PlanDigest, g.StepIndex, n}] = t.Seq
		}
		return err
	}}
	s.qmu.Lock()
	closed := s.closed
	if !closed {
		s.queue = append(s.queue, o)
	}
	s.qmu.Unlock()
	if closed {
		return ledger.Ticket{}, nil, true, ledger.ErrClosed
	}
	s.signal()
	return ledger.Ticket{PlanDigest: rv.PlanDigest, Step: rv.Step, StepIndex: rv.StepIndex, Tool: rv.Tool, Used: n, At: now.UTC()}, o, true, nil
}

// reserveTx decides rv in the writer's transaction: inside a lease that
// another call took meanwhile, else as a new lease or a single count.
func (s *Store) reserveTx(m *ledger.Machine, rv ledger.Reservation, now time.Time) (ledger.Ticket, error) {
	if rv.HoldID == "" && !rv.OverLimit {
		s.lmu.Lock()
		if rv.Check != nil && s.grants[stepKey{rv.PlanDigest, rv.StepIndex}] != nil {
			// Before the take: a refused call takes no call number.
			if err := rv.Check(s.localLocked(rv.PlanDigest, m.Progress(rv.PlanDigest))); err != nil {
				s.lmu.Unlock()
				return ledger.Ticket{}, err
			}
		}
		gr, n := s.take(rv, s.now())
		s.lmu.Unlock()
		if gr != nil {
			t, err := m.RecordLeased(gr.g, rv.Call, n, now)
			if err == nil {
				s.sent[callKey{rv.PlanDigest, rv.StepIndex, n}] = t.Seq
				t.Seq = 0 // its outcome finds the ref in sent, as for any leased call
			}
			return t, err
		}
	}
	s.lmu.Lock()
	off := s.leaseOff
	s.lmu.Unlock()
	rv = s.localCheck(rv)
	if off { // closing: no new lease
		return m.Reserve(rv, now)
	}
	t, g, err := m.LeaseReserve(rv, s.replica, s.leaseTTL, now)
	if err != nil || g.Seq == 0 {
		return t, err
	}
	s.lmu.Lock()
	if !s.leaseOff {
		k := stepKey{g.PlanDigest, g.StepIndex}
		s.dropLocked(k)
		s.grants[k] = &grant{g: g, next: g.First + 1, useUntil: s.now().Add(s.leaseTTL / 2), prog: m.Progress(g.PlanDigest), failures: s.failures}
	}
	s.lmu.Unlock()
	return t, nil
}

// dropLocked stops using a lease and queues the return of what is left.
// lmu held.
func (s *Store) dropLocked(k stepKey) {
	gr := s.grants[k]
	if gr == nil {
		return
	}
	delete(s.grants, k)
	if sp := gr.spare; sp != nil {
		s.postReturn(sp)
	}
	s.postReturn(gr)
}

// postReturn queues the return of what is left of a lease; lmu held.
func (s *Store) postReturn(gr *grant) {
	if gr.next <= gr.g.Through {
		seq, failures := gr.g.Seq, gr.failures
		s.post(func(m *ledger.Machine, now time.Time) error {
			if s.failures != failures {
				return nil // records of its calls may be lost: settled as used at its expiry
			}
			return m.ReturnLease(seq, now)
		})
	}
}

func (s *Store) dropGrant(k stepKey) {
	s.lmu.Lock()
	s.dropLocked(k)
	s.lmu.Unlock()
}

// refreshGrants gives the leases the state as of this transaction, for the
// order rule of the calls inside them. mu held.
func (s *Store) refreshGrants() {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	for _, gr := range s.grants {
		gr.prog = s.m.Progress(gr.g.PlanDigest)
	}
}

// unused is the number of calls of gr (and its spare) not handed out yet.
func (gr *grant) unused() int {
	n := max(gr.g.Through-gr.next+1, 0)
	if gr.spare != nil {
		n += gr.spare.unused()
	}
	return n
}

// localLocked is p, the chain's progress of plan as of the last
// transaction, as this replica sees it (ledger.Progress.Local): the calls
// of its own leases it has not handed out are not counted, and the
// successes it posted count. lmu held.
func (s *Store) localLocked(plan string, p ledger.Progress) ledger.Progress {
	var unused []int
	for k, gr := range s.grants {
		if k.plan != plan {
			continue
		}
		if n := gr.unused(); n > 0 {
			for len(unused) <= k.idx {
				unused = append(unused, 0)
			}
			unused[k.idx] += n
		}
	}
	done := s.done[plan]
	if unused == nil && done == nil {
		return p
	}
	return p.Local(unused, done)
}

// localCheck gives rv's order check, which the Machine runs with the
// chain's progress, this replica's view of it.
func (s *Store) localCheck(rv ledger.Reservation) ledger.Reservation {
	if check := rv.Check; check != nil {
		rv.Check = func(p ledger.Progress) error {
			s.lmu.Lock()
			p = s.localLocked(rv.PlanDigest, p)
			s.lmu.Unlock()
			return check(p)
		}
	}
	return rv
}

// markDone counts a posted success of step i at once (see Store.done).
func (s *Store) markDone(plan string, i int) {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	d := s.done[plan]
	for len(d) <= i {
		d = append(d, false)
	}
	d[i] = true
	s.done[plan] = d
}
