package ledger

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// A lease (see the package doc) counts at most 1/leaseShare of a step's
// calls left and at most leaseMax ahead, so a crash costs a step at most 1% of
// what was left; fewer than 2*leaseShare calls left are counted one by one.
const (
	leaseMax   = 256
	leaseShare = 100
)

// renewAt: once fewer than k/renewAt calls of a lease of k are left, the
// next call renews it ahead (see Reserve), so that the lease record's
// fdatasync is done before a call needs it.
const renewAt = 4

// isDone reports whether b (nil: none) is acknowledged.
func isDone(b *batch) bool {
	if b == nil {
		return true
	}
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

// leaseSize is how many calls a new lease covers once used of maxCalls are
// taken; below 2 the call is counted alone.
func leaseSize(maxCalls, used int) int {
	left := maxCalls - used
	if left <= 0 {
		return 0
	}
	return min(leaseMax, left/leaseShare)
}

// openLeasesLocked calls fn for every step whose lease is not used up, in a
// stable order.
func (l *Ledger) openLeasesLocked(fn func(digest string, i int, p *planState)) {
	digests := make([]string, 0, len(l.st.plans))
	for d := range l.st.plans {
		digests = append(digests, d)
	}
	slices.Sort(digests)
	for _, d := range digests {
		p := l.st.plans[d]
		for i := range p.used {
			if p.leased[i] > p.used[i] {
				fn(d, i, p)
			}
		}
	}
}

// settleLeases counts, at Open, every lease the last process left open (it
// stopped without Close): the calls it covered may have been forwarded with
// their allow records lost, so they all count as used.
func (l *Ledger) settleLeases(ctx context.Context) error {
	last := l.settleLeasesQueue(l.stamp())
	if last == nil {
		return nil
	}
	l.writeQueued()
	if err := wait(ctx, last); err != nil {
		return fmt.Errorf("count the calls of an unclosed lease: %w", err)
	}
	return nil
}

// settleLeasesQueue is settleLeases' locked step: it queues the records and
// returns the last one's batch (nil: no lease was open).
func (l *Ledger) settleLeasesQueue(now time.Time) *batch {
	l.mu.Lock()
	defer l.mu.Unlock()
	var last *batch
	l.openLeasesLocked(func(d string, i int, p *planState) {
		idx := i
		r := record{Time: now, Type: typeLease, Plan: d, Step: p.names[i], StepIndex: &idx, Used: p.leased[i], Through: p.leased[i],
			Note: fmt.Sprintf("the proxy stopped without closing its state; the %d calls leased but not recorded count as used", p.leased[i]-p.used[i])}
		body, err := encodeBody(&r)
		if err != nil {
			return // only plain data: cannot happen
		}
		p.used[i] = p.leased[i]
		_, last = l.enqueueLocked(body, true)
	})
	return last
}

// returnLeasesLocked gives back, at Close, what is left of every lease,
// before the writer's last batch.
func (l *Ledger) returnLeasesLocked() {
	now := l.stamp()
	l.openLeasesLocked(func(d string, i int, p *planState) {
		idx := i
		r := record{Time: now, Type: typeLease, Plan: d, Step: p.names[i], StepIndex: &idx, Used: p.used[i], Through: p.used[i],
			Note: fmt.Sprintf("%d leased calls returned at shutdown", p.leased[i]-p.used[i])}
		if body, err := encodeBody(&r); err == nil {
			p.leased[i] = p.used[i]
			l.enqueueLocked(body, false)
		}
	})
}

// WaitsForDisk reports whether Reserve(rv) would, with the state as it is
// now, wait for an fdatasync: under Options.SyncEachCall, when it consumes
// a hold, or when the step's lease is used up or not yet durable. A relay
// that handles one call at a time on one goroutine can then hand such a
// call to a goroutine of its own, so that concurrent calls share one
// fdatasync (group commit) instead of taking turns at the disk. It is
// advice: the state may change before Reserve.
func (l *Ledger) WaitsForDisk(rv Reservation) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.syncEach || rv.HoldID != "" {
		return true
	}
	p := l.st.plans[rv.PlanDigest]
	i := rv.StepIndex
	if p == nil || i < 0 || i >= len(p.used) || p.used[i]+1 > p.leased[i] {
		return true
	}
	return p.used[i]+1 > p.leaseFrom[i] && !isDone(p.leaseBatch[i])
}
