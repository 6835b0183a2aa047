package ledger

import (
	"fmt"
	"time"
)

// The sync lane: the journal's fdatasync and the anchor's update run
// outside wmu, so a record that needs no sync is written while a sync is
// under way instead of waiting for a disk flush it does not need.
//
// A turn of the writer writes its records under wmu, then, under mu, tells
// the lane the journal's new end (written) and, when its batch needs it
// (a durable record, the flush timer, Close), asks for a sync of it: the
// batch waits in waiters. One runner at a time (busy) takes what is asked
// (the newest written end and every waiter), fdatasyncs the journal, when
// asked (the flush timer, Close) writes the anchor at that end and syncs
// it, and only then acknowledges the waiters. The anchor is written only
// to be synced at once: written at every sync, it would name a head no
// sooner on disk, for a system call more on the path of every call that
// waits for its sync. A record written while a sync is under way is
// therefore acknowledged by a later sync, which began after its write: a
// sync started before the write may not cover it. Since there is one
// runner and each takes a later end than the one before, syncs finish in
// order and the anchor only moves forward (anchor.write also refuses to go
// back).
//
// Who runs: a caller whose own turn asked for a sync and found the lane
// idle runs it on its goroutine (one call at a time never waits for
// another goroutine); otherwise the syncer goroutine does, and keeps
// running while more is asked meanwhile (group commit: the records of many
// callers share one fdatasync). The runner owns the anchor; a checkpoint,
// a rotation and Close take the lane (acquireLane) before they touch it.
//
// A failed sync fails the ledger (l.failed): its waiters and every later
// one get the error, and the next turn writes nothing.

// syncLane is the lane's state; mu guards it.
type syncLane struct {
	busy    bool          // a runner owns the journal's sync and the anchor
	idle    chan struct{} // closed when the runner lets go
	written Head          // the journal's last written record
	durable uint64        // seq of the last record a sync covered
	want    bool          // a sync of written (or of the anchor) is asked for
	anchor  bool          // the anchor is to be synced too (flush, Close)
	waiters []*batch      // acknowledged by the next sync
	// anchorBehind: records are durable that the anchor does not name
	// yet. armed: the flush timer runs.
	anchorBehind, armed bool
}

// syncJob is what one runner syncs.
type syncJob struct {
	target  Head
	journal bool // records through target are not durable yet
	anchor  bool
	waiters []*batch
	inline  bool // a caller's goroutine runs it: one job, no more
}

// askSyncLocked asks the lane to sync the journal through written, with b
// waiting for it (nil: nobody waits, as for the flush timer); anchor asks
// for the anchor's sync too.
func (l *Ledger) askSyncLocked(b *batch, anchor bool) {
	ln := &l.lane
	if l.failed != nil {
		ackLocked([]*batch{b}, l.failed)
		return
	}
	if b != nil {
		ln.waiters = append(ln.waiters, b)
	}
	ln.want = true
	ln.anchor = ln.anchor || anchor
}

// takeSyncLocked makes the caller the runner of what is asked, if the
// lane is idle and something is asked.
func (l *Ledger) takeSyncLocked(inline bool) *syncJob {
	ln := &l.lane
	if ln.busy || !ln.want {
		return nil
	}
	if l.failed != nil {
		ackLocked(ln.waiters, l.failed)
		ln.waiters, ln.want, ln.anchor = nil, false, false
		return nil
	}
	job := &syncJob{target: ln.written, journal: ln.written.Seq > ln.durable, anchor: ln.anchor,
		waiters: ln.waiters, inline: inline}
	ln.waiters, ln.want, ln.anchor = nil, false, false
	ln.busy, ln.idle = true, make(chan struct{})
	return job
}

func ackLocked(bs []*batch, err error) {
	for _, b := range bs {
		if b != nil {
			b.err = err
			close(b.done)
		}
	}
}

// signalSync wakes the syncer goroutine.
func (l *Ledger) signalSync() {
	select {
	case l.syncKick <- struct{}{}:
	default:
	}
}

// syncer is the goroutine that runs the syncs no caller ran.
func (l *Ledger) syncer() {
	defer close(l.syncStopped)
	for {
		select {
		case <-l.syncKick:
		case <-l.syncQuit:
			return
		}
		l.runSync(l.takeSync())
	}
}

func (l *Ledger) takeSync() *syncJob {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.takeSyncLocked(false)
}

// runSync runs job (nil: nothing) and, unless it is a caller's, the jobs
// asked for meanwhile. wmu must not be held.
func (l *Ledger) runSync(job *syncJob) {
	for job != nil {
		var st syncStats
		err := l.syncOnce(job, &st)
		next := l.synced(job, st, err)
		if err == nil && st.journal && l.onSync != nil {
			l.onSync(st.took)
		}
		job = next
	}
}

type syncStats struct {
	journal                   bool
	took                      time.Duration
	anchorWrites, anchorSyncs uint64
}

// syncOnce is one job's disk work, by the runner, outside every lock.
func (l *Ledger) syncOnce(job *syncJob, st *syncStats) error {
	// A caller that runs its own sync under RawAppends (one stdio client,
	// which waits for it) makes the fdatasync a raw system call, as its
	// appends: through the scheduler's hand-off, it wakes the runtime's
	// monitor thread, which then polls every 20 µs through the sync and
	// the next call, on the cores the client and the upstream need. The
	// syncer goroutine, whose P others' goroutines may need meanwhile,
	// keeps the hand-off.
	if job.journal {
		start := time.Now()
		if err := l.syncJournalTo(job.target.Seq, job.inline && l.rawAppends); err != nil {
			return fmt.Errorf("%w: write %s: %w", ErrFailed, l.auditPath, err)
		}
		st.journal, st.took = true, time.Since(start)
	}
	if !job.anchor {
		return nil
	}
	// Only once they are durable may the anchor name these records.
	if job.target.Seq > l.anchor.at {
		if err := l.anchor.write(job.target); err != nil {
			return err
		}
		st.anchorWrites++
	}
	if l.anchor.dirty {
		if err := l.anchor.sync(); err != nil {
			return err
		}
		st.anchorSyncs++
	}
	return nil
}

// synced records a job's end, acknowledges its waiters and returns the
// next job for a runner that goes on (nil: the lane is let go; when more
// was asked of a caller's run, the syncer goroutine takes it).
func (l *Ledger) synced(job *syncJob, st syncStats, err error) *syncJob {
	l.mu.Lock()
	defer l.mu.Unlock()
	ln := &l.lane
	if st.journal {
		l.stats.Syncs++
		l.stats.SyncTime += st.took
	}
	l.stats.AnchorWrites += st.anchorWrites
	l.stats.AnchorSyncs += st.anchorSyncs
	if err != nil {
		l.failLocked(err)
		err = l.failed
	} else if job.journal {
		ln.durable = max(ln.durable, job.target.Seq)
	}
	ackLocked(job.waiters, err)
	ln.anchorBehind = l.anchorBehindLocked()
	l.armLocked()
	ln.busy = false
	close(ln.idle)
	ln.idle = nil
	if job.inline {
		if ln.want {
			l.signalSync()
		}
		return nil
	}
	return l.takeSyncLocked(false)
}

// armLocked starts the flush timer when something waits for a sync and
// nobody asked for one: records written but not durable, durable records
// the anchor does not name. Not reset while armed: steady traffic must not
// postpone it.
func (l *Ledger) armLocked() {
	ln := &l.lane
	if ln.armed || l.closed || ln.want {
		return
	}
	if ln.written.Seq > ln.durable || ln.anchorBehind {
		l.flushTimer.Reset(l.flushEvery)
		ln.armed = true
	}
}

// anchorBehindLocked reports whether records are durable that the anchor
// does not name (or it was written and not synced). Only the lane's owner
// writes the anchor: mu and the lane, or mu after the owner let it go.
func (l *Ledger) anchorBehindLocked() bool {
	return l.anchor.dirty || l.anchor.at < l.lane.durable
}

// acquireLane waits until no sync runs and takes the lane: a checkpoint,
// a rotation or Close then owns the journal's sync and the anchor. Only
// the writer goroutine (or Close after it stopped) calls it, with wmu.
func (l *Ledger) acquireLane() {
	for {
		idle := l.tryAcquireLane()
		if idle == nil {
			return
		}
		<-idle
	}
}

func (l *Ledger) tryAcquireLane() chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lane.busy {
		return l.lane.idle
	}
	l.lane.busy, l.lane.idle = true, make(chan struct{})
	return nil
}

// releaseLane lets the lane go after a checkpoint or rotation; ok when it
// made the journal durable through its head h (and the anchor at it), which
// covers every record written before it: their waiters are acknowledged.
func (l *Ledger) releaseLane(h Head, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ln := &l.lane
	if ok {
		ln.written, ln.durable = h, h.Seq
		ln.anchorBehind = l.anchorBehindLocked()
		ackLocked(ln.waiters, nil)
		ln.waiters, ln.want, ln.anchor = nil, false, false
	}
	ln.busy = false
	close(ln.idle)
	ln.idle = nil
	if ln.want {
		l.signalSync()
	}
}

// drainSync runs, on the writer goroutine at Close, every sync asked for,
// after the one in flight, then stops the syncer goroutine.
func (l *Ledger) drainSync() {
	for {
		job, idle := l.takeOrWait()
		switch {
		case job != nil:
			l.runSync(job)
		case idle != nil:
			<-idle
		default:
			close(l.syncQuit)
			<-l.syncStopped
			return
		}
	}
}

func (l *Ledger) takeOrWait() (*syncJob, chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lane.busy {
		return nil, l.lane.idle
	}
	return l.takeSyncLocked(false), nil
}
