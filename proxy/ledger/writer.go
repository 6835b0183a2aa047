package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/planlock/planlock/internal/datasync"
)

// The group-commit writer. Locking, here and in the whole package: mu
// guards the fields the Ledger type marks so; a function that takes it does
// so on its first lines with a deferred unlock, and a function whose name
// ends in Locked expects its caller to hold it. Nothing waits under mu: no
// fdatasync, no wait for a batch. A public method that must wait takes the
// lock in a small helper that queues the record and returns the batch, then
// waits once the helper returned.
//
// wmu is the journal's: whoever holds it runs one turn of the writer (see
// turn) and owns, for that turn, the journal's end (head, written, end),
// the journal's file for writing and the writer's state w. It is held for
// the turn's write only: the fdatasync the turn needs, and the anchor's
// update after it, run once it is let go, by the sync lane (synclane.go),
// which owns the anchor; a checkpoint or rotation, under wmu, takes the
// lane too. wmu is taken before mu, never under it. The writer goroutine
// takes it with Lock for the turns it is kicked for (and the flush
// timer's); a caller that queued a record takes it only with TryLock, in
// writeQueued: when the journal is free the caller runs the turn itself and
// no goroutine hand-off is paid, and when a turn is under way the caller
// kicks the writer goroutine instead of waiting for the lock, so
// concurrent records still share one write, and share one fdatasync in
// the lane. Only the writer goroutine runs the last turn (after Close) and
// finishes checkpoints and rotations.

type entry struct {
	seq  uint64
	body []byte
}

// batch is a group of records written together; done closes once they are
// written and, if any needed it, synced.
type batch struct {
	sync bool
	done chan struct{}
	err  error
}

func (l *Ledger) signal() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// usableLocked reports why the ledger cannot take a record.
func (l *Ledger) usableLocked() error {
	if l.closed {
		return ErrClosed
	}
	if l.failed != nil {
		return l.failed
	}
	return nil
}

// enqueueLocked hands a record to the writer and returns its seq and batch.
// Call after usableLocked.
func (l *Ledger) enqueueLocked(body []byte, durable bool) (uint64, *batch) {
	l.seq++
	l.pending = append(l.pending, entry{seq: l.seq, body: body})
	if l.cur == nil {
		l.cur = &batch{done: make(chan struct{})}
	}
	if durable {
		l.cur.sync = true
	}
	return l.seq, l.cur
}

// enqueueAheadLocked queues a lease record renewed ahead: it is written
// with the pending records but made durable for its own batch, which
// nobody queuing it waits for (see Reserve).
func (l *Ledger) enqueueAheadLocked(body []byte) *batch {
	l.enqueueLocked(body, false)
	b := &batch{sync: true, done: make(chan struct{})}
	l.ahead = append(l.ahead, b)
	return b
}

// commit encodes r and, under the lock, runs apply (nil: nothing to do),
// which may refuse with an error or change the state the record stands
// for, then queues the record: a state change is made together with the
// enqueue of its record. A durable record is waited for.
func (l *Ledger) commit(ctx context.Context, r *record, durable bool, apply func() error) error {
	body, err := encodeBody(r)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	b, err := l.queue(body, durable, apply)
	if err != nil {
		return err
	}
	l.writeQueuedFor(durable)
	if durable {
		return wait(ctx, b)
	}
	return nil
}

// queue is commit's locked step.
func (l *Ledger) queue(body []byte, durable bool, apply func() error) (*batch, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return nil, err
	}
	if apply != nil {
		if err := apply(); err != nil {
			return nil, err
		}
	}
	_, b := l.enqueueLocked(body, durable)
	return b, nil
}

// wait blocks until b is durable. A cancelled ctx returns early, but the
// record may still be written: a count once taken stays taken.
func wait(ctx context.Context, b *batch) error {
	select {
	case <-b.done: // most often written already, by the caller's own turn
		return b.err
	default:
	}
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writerState is what the writer keeps from turn to turn; wmu guards it.
type writerState struct {
	buf    []byte
	spare  []entry
	broken error // after a failed write nothing more is written
	// cp is a checkpoint or rotation a caller's turn prepared: the writer
	// goroutine finishes it before anything else is written.
	cp *cpPrep
}

// writeQueued has the queued records written: by the caller, at once,
// when the journal is free, else by the writer goroutine. After an inline
// turn the goroutine is kicked when records are left queued (or a
// checkpoint waits for it), and the caller runs the sync its turn asked
// for when no sync is under way (see synclane.go), after letting go of
// the journal. For a caller that waits for its batch.
func (l *Ledger) writeQueued() { l.writeQueuedFor(true) }

// writeQueuedFor is writeQueued; waits is false for a caller that does not
// wait for its batch, which then never runs a sync: a durable record of
// another caller that shares its batch is synced by the syncer goroutine.
func (l *Ledger) writeQueuedFor(waits bool) {
	kick, job := l.writeInline(waits)
	if kick {
		l.signal()
	}
	l.runSync(job)
}

// writeInline runs a turn on the caller's goroutine if the journal is
// free, and reports whether the writer goroutine must run one, and the
// sync the caller is to run (nil: none). TryLock, not Lock: a caller never
// waits for another's turn (its record rides the next turn of the writer
// goroutine), so nobody waits for the journal in a queue of callers.
func (l *Ledger) writeInline(waits bool) (kick bool, job *syncJob) {
	if l.wmu.TryLock() {
		defer l.wmu.Unlock()
		kick, _, job = l.turn(false, true, waits)
		return kick, job
	}
	return true, nil
}

// writerTurn is one turn of the writer goroutine; true once it ran the
// last one (the ledger is closing).
func (l *Ledger) writerTurn(flush bool) (closing bool) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	_, closing, _ = l.turn(flush, false, false)
	return closing
}

// takePending hands the queued records and their batch to the writer,
// leaving spare as the new queue, with the ledger's failure (a failed
// sync). Once the ledger is closing, only the writer goroutine takes them
// (ok false for a caller's turn): the last turn is its own.
func (l *Ledger) takePending(spare []entry, inline bool) (entries []entry, b *batch, ahead []*batch, closing bool, failed error, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if inline && l.closed {
		return nil, nil, nil, true, nil, false
	}
	entries, b, ahead, closing = l.pending, l.cur, l.ahead, l.closed
	l.pending, l.cur, l.ahead = spare[:0], nil, nil
	return entries, b, ahead, closing, l.failed, true
}

// turnStats is what one turn of the writer did, for the counters.
type turnStats struct {
	records int
	closing bool
}

// account adds a turn of the writer to the counters and records its
// failure; it hands the journal's new end to the sync lane, acknowledges
// a batch that needs no sync and asks the lane for the sync the others
// (and the flush timer, and Close) need; when one is due and nothing is
// queued, it prepares a checkpoint. more reports records left queued; job
// is the sync a caller's turn is to run itself (only one that waits for
// its batch: waits).
func (l *Ledger) account(t turnStats, err error, b *batch, ahead []*batch, flush, inline, waits bool) (cp *cpPrep, more bool, job *syncJob) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.records > 0 {
		l.stats.Records += uint64(t.records)
		l.stats.Batches++
	}
	if err != nil {
		l.failLocked(err)
		err = l.failed
		ackLocked([]*batch{b}, err)
		ackLocked(ahead, err)
		return nil, len(l.pending) > 0, nil
	}
	ln := &l.lane
	if t.records > 0 {
		ln.written = Head{Seq: l.written, Hash: l.head}
	}
	if flush {
		ln.armed = false
	}
	switch {
	case b != nil && b.sync:
		l.askSyncLocked(b, t.closing)
	case t.closing || flush && (ln.written.Seq > ln.durable || ln.anchorBehind):
		ackLocked([]*batch{b}, nil)
		l.askSyncLocked(nil, true)
	default:
		ackLocked([]*batch{b}, nil) // written: it needs no sync
	}
	for _, a := range ahead {
		l.askSyncLocked(a, false) // leases renewed ahead: nobody here waits
	}
	asked := ln.want
	defer func() {
		switch {
		case cp != nil && !inline:
			// The writer finishes it at once: its sync covers what is asked.
		case inline && waits && b != nil && b.sync:
			// The caller waits for this sync anyway: it runs it itself
			// when none is under way (else the runner's next covers it).
			job = l.takeSyncLocked(true)
		case !t.closing && ln.want && !ln.busy:
			// Never on the goroutine of a caller that need not wait.
			l.signalSync()
		}
		l.armLocked()
	}()
	if asked && !t.closing && l.rotateDueLocked(l.stamp()) {
		// Unlike a checkpoint, a rotation does not wait for a quiet
		// moment, which steady traffic may never give: the records queued
		// now go to the old file first, and the state the segment record
		// carries is the state after them.
		cp := l.prepareSegmentLocked()
		if cp != nil {
			cp.entries, cp.batch = l.pending, l.cur
			l.pending, l.cur = nil, nil
		}
		l.checkpointAt = l.stats.Records + 1
		return cp, false, nil
	}
	if asked && !t.closing && len(l.pending) == 0 &&
		l.checkpointEvery > 0 && l.stats.Records-l.checkpointAt >= l.checkpointEvery {
		// Nothing is queued, so the state is exactly what the journal
		// holds up to l.end: every change of it is made together with
		// the enqueue of its record, under mu.
		cp := l.prepareCheckpointLocked()
		l.checkpointAt = l.stats.Records + 1
		return cp, false, nil
	}
	return nil, len(l.pending) > 0, nil
}

// writer is the goroutine that runs the turns no caller ran: those it is
// kicked for while the journal was busy, the flush timer's, and the last
// one at Close, after which it runs the syncs left and stops the syncer.
// In a disk fault it reports the fault and tries to recover every
// RetryInterval (fault.go).
func (l *Ledger) writer() {
	defer close(l.stopped)
	var retry <-chan time.Time
	for {
		var flush bool
		select {
		case <-l.kick:
		case <-l.flushTimer.C:
			flush = true
		case <-retry:
			retry = nil
			l.recoverFault()
		}
		if l.writerTurn(flush) {
			l.drainSync()
			l.flushTimer.Stop()
			return
		}
		if l.noteFault() && retry == nil {
			retry = time.After(l.retryEvery())
		}
	}
}

// turn is one turn of the writer; wmu must be held. It takes all pending
// records and writes them with one write; the sync they (or the flush
// timer, or Close) need is asked of the sync lane, which runs it once wmu
// is let go (see synclane.go), and a batch that needs none is
// acknowledged at once. A caller's turn (inline) leaves a checkpoint or
// rotation it prepares to the writer goroutine, and runs no turn while one
// waits or once the ledger is closing (waits: its caller waits for its
// batch, see writeQueuedFor). kick reports that the writer
// goroutine must run a turn (records are left queued, or a checkpoint
// waits for it); closing that this was the last turn; job is the sync a
// caller's turn is to run.
func (l *Ledger) turn(flush, inline, waits bool) (kick, closing bool, job *syncJob) {
	w := &l.w
	if inline && w.cp != nil {
		return true, false, nil
	}
	if w.cp != nil {
		// Before any record queued after it took its seq.
		cp := w.cp
		w.cp = nil
		l.finishPrep(cp)
	}
	entries, b, ahead, closing, failed, ok := l.takePending(w.spare, inline)
	if !ok {
		return true, false, nil // the last turn is the writer goroutine's
	}
	t := turnStats{records: len(entries), closing: closing}

	err := w.broken
	if err == nil {
		err = failed // a sync failed: nothing more is written
	}
	if err == nil && len(entries) > 0 {
		buf := w.buf[:0]
		lastStart := 0
		for _, e := range entries {
			lastStart = len(buf)
			buf, l.head = appendKeyedLine(buf, e.seq, l.head, e.body, l.key)
		}
		w.buf = buf
		if l.writeHook != nil {
			_, err = l.writeHook(l.journal, buf)
		} else {
			_, err = l.appendJournal(buf)
		}
		if err == nil {
			l.fs.wrote(l.auditPath, l.end.size, buf)
			l.end.lastStart = l.end.size + int64(lastStart)
			l.end.size += int64(len(buf))
		} else {
			// Best effort: drop a partial write so the journal still
			// ends on a whole record.
			_ = l.journal.Truncate(l.end.size)
		}
	}
	if err == nil && len(entries) > 0 {
		l.written = entries[len(entries)-1].seq
		if l.fileStarted.IsZero() {
			l.fileStarted = l.stamp() // a new journal's first record, for RotateEvery
		}
	}
	if err != nil && w.broken == nil {
		if !errors.Is(err, ErrFailed) {
			err = fmt.Errorf("%w: write %s: %w", ErrFailed, l.auditPath, err)
		}
		w.broken = err
	}
	if l.turnHook != nil && len(entries) > 0 {
		l.turnHook(inline, len(entries))
	}
	cp, more, job := l.account(t, err, b, ahead, flush, inline, waits)
	if cp != nil {
		if inline {
			// Not on a caller's goroutine: a checkpoint or rotation
			// costs fdatasyncs and renames a call should not wait for.
			w.cp, more = cp, true
		} else {
			l.finishPrep(cp)
		}
	}
	clear(entries)
	w.spare = entries
	return more, closing, job
}

// finishPrep writes a checkpoint or rotation account prepared; wmu must
// be held. Its failure fails the ledger.
func (l *Ledger) finishPrep(cp *cpPrep) {
	l.acquireLane()
	var h Head
	var err error
	if cp.segment != "" {
		h, err = l.rotate(cp)
	} else {
		h, err = l.finishCheckpoint(cp)
	}
	if err != nil {
		l.w.broken = err
		l.fail(err)
	}
	l.releaseLane(h, err == nil)
	if err == nil && l.onHead != nil {
		l.onHead(h)
	}
}

// syncJournal is an fdatasync of the journal through seq outside the sync
// lane (a checkpoint), reported to OnSync like the lane's.
func (l *Ledger) syncJournal(seq uint64) error {
	start := time.Now()
	if err := l.syncJournalTo(seq, false); err != nil {
		return err
	}
	if l.onSync != nil {
		l.onSync(time.Since(start))
	}
	return nil
}

// syncJournalTo is the fdatasync that makes the journal durable through
// record seq, a raw system call when raw (see syncOnce); tests replace it
// with syncHook.
func (l *Ledger) syncJournalTo(seq uint64, raw bool) error {
	l.fs.syncing(l.auditPath)
	var err error
	switch {
	case l.syncHook != nil:
		err = l.syncHook(l.journal, seq, raw)
	case raw:
		err = datasync.Raw(l.journal)
	default:
		err = datasync.Sync(l.journal)
	}
	return err
}
