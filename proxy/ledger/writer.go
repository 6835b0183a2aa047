package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
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
// the files, the anchor and the writer's state w. It is held for a whole
// turn, fdatasync included, and taken before mu, never under it. The
// writer goroutine takes it with Lock for the turns it is kicked for (and
// the flush timer's); a caller that queued a record takes it only with
// TryLock, in writeQueued: when the journal is free the caller runs the
// turn itself and no goroutine hand-off is paid, and when a turn is under
// way the caller kicks the writer goroutine instead of waiting for the
// lock, so concurrent records still share one write and one fdatasync.
// Only the writer goroutine runs the last turn (after Close) and finishes
// checkpoints and rotations.

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
	l.writeQueued()
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
	dirty  bool  // records written but not synced
	armed  bool  // the flush timer runs: it syncs what is dirty at the latest flushEvery after the first unsynced write
	broken error // after a failed write nothing more is written
	// cp is a checkpoint or rotation a caller's turn prepared: the writer
	// goroutine finishes it before anything else is written.
	cp *cpPrep
}

// writeQueued has the queued records written: by the caller, at once,
// when the journal is free, else by the writer goroutine. After an inline
// turn the goroutine is kicked when records are left queued (or a
// checkpoint waits for it).
func (l *Ledger) writeQueued() {
	if l.writeInline() {
		l.signal()
	}
}

// writeInline runs a turn on the caller's goroutine if the journal is
// free, and reports whether the writer goroutine must run one. TryLock,
// not Lock: a caller never waits for another's turn (its record rides the
// next turn of the writer goroutine, which shares the fdatasync among all
// the records queued meanwhile), so nobody waits for the journal in a
// queue of callers.
func (l *Ledger) writeInline() (kick bool) {
	if l.wmu.TryLock() {
		defer l.wmu.Unlock()
		kick, _ = l.turn(false, true)
		return kick
	}
	return true
}

// writerTurn is one turn of the writer goroutine; true once it ran the
// last one (the ledger is closing).
func (l *Ledger) writerTurn(flush bool) (closing bool) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	_, closing = l.turn(flush, false)
	return closing
}

// takePending hands the queued records and their batch to the writer,
// leaving spare as the new queue. Once the ledger is closing, only the
// writer goroutine takes them (ok false for a caller's turn): the last
// turn is its own.
func (l *Ledger) takePending(spare []entry, inline bool) (entries []entry, b *batch, closing, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if inline && l.closed {
		return nil, nil, true, false
	}
	entries, b, closing = l.pending, l.cur, l.closed
	l.pending, l.cur = spare[:0], nil
	return entries, b, closing, true
}

// turnStats is what one turn of the writer did, for the counters.
type turnStats struct {
	records                   int
	synced                    bool
	syncTime                  time.Duration
	anchorWrites, anchorSyncs uint64
	closing                   bool
}

// account adds a turn of the writer to the counters, records its failure
// and, when one is due and nothing is queued, prepares a checkpoint. more
// reports records left queued.
func (l *Ledger) account(w turnStats, err error) (cp *cpPrep, more bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.records > 0 {
		l.stats.Records += uint64(w.records)
		l.stats.Batches++
	}
	if w.synced {
		l.stats.Syncs++
		l.stats.SyncTime += w.syncTime
	}
	l.stats.AnchorWrites += w.anchorWrites
	l.stats.AnchorSyncs += w.anchorSyncs
	if err != nil {
		l.failLocked(err)
		return nil, len(l.pending) > 0
	}
	if w.synced && !w.closing && l.rotateDueLocked(l.stamp()) {
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
		return cp, false
	}
	if w.synced && !w.closing && len(l.pending) == 0 &&
		l.checkpointEvery > 0 && l.stats.Records-l.checkpointAt >= l.checkpointEvery {
		// Nothing is queued, so the state is exactly what the journal
		// holds up to l.end: every change of it is made together with
		// the enqueue of its record, under mu.
		cp := l.prepareCheckpointLocked()
		l.checkpointAt = l.stats.Records + 1
		return cp, false
	}
	return nil, len(l.pending) > 0
}

// writer is the goroutine that runs the turns no caller ran: those it is
// kicked for while the journal was busy, the flush timer's, and the last
// one at Close.
func (l *Ledger) writer() {
	defer close(l.stopped)
	for {
		var flush bool
		select {
		case <-l.kick:
		case <-l.flushTimer.C:
			flush = true
		}
		if l.writerTurn(flush) {
			return
		}
	}
}

// turn is one turn of the writer; wmu must be held. It takes all pending
// records, writes them with one write and, if one of them needs it (or
// flush, or the ledger is closing), one fdatasync (group commit), then
// acknowledges their batch. Records that need no sync are synced by the
// flush timer. A caller's turn (inline) leaves a checkpoint or rotation it
// prepares to the writer goroutine, and runs no turn while one waits or
// once the ledger is closing. kick reports that the writer goroutine
// must run a turn (records are left queued, or a checkpoint waits for
// it); closing that this was the last turn.
func (l *Ledger) turn(flush, inline bool) (kick, closing bool) {
	w := &l.w
	if inline && w.cp != nil {
		return true, false
	}
	if flush {
		w.armed = false
	}
	if w.cp != nil {
		// Before any record queued after it took its seq.
		cp := w.cp
		w.cp = nil
		l.finishPrep(cp)
	}
	entries, b, closing, ok := l.takePending(w.spare, inline)
	if !ok {
		return true, false // the last turn is the writer goroutine's
	}
	t := turnStats{records: len(entries), closing: closing}

	err := w.broken
	if err == nil && len(entries) > 0 {
		buf := w.buf[:0]
		lastStart := 0
		for _, e := range entries {
			lastStart = len(buf)
			buf, l.head = appendLine(buf, e.seq, l.head, e.body)
		}
		w.buf = buf
		_, err = l.journal.Write(buf)
		if err == nil {
			l.end.lastStart = l.end.size + int64(lastStart)
			l.end.size += int64(len(buf))
		} else {
			// Best effort: drop a partial write so the journal still
			// ends on a whole record.
			_ = l.journal.Truncate(l.end.size)
		}
		w.dirty = true
	}
	if err == nil && len(entries) > 0 {
		l.written = entries[len(entries)-1].seq
		if l.fileStarted.IsZero() {
			l.fileStarted = l.stamp() // a new journal's first record, for RotateEvery
		}
	}
	if err == nil && w.dirty && (flush || closing || (b != nil && b.sync)) {
		start := time.Now()
		err = datasync(l.journal)
		t.syncTime = time.Since(start)
		w.dirty, t.synced = false, true
		if err == nil {
			// Only now, once they are durable, may the anchor name
			// these records. Its own sync waits for the timer.
			err = l.anchor.write(Head{Seq: l.written, Hash: l.head})
			t.anchorWrites++
		}
	}
	if err == nil && (flush || closing) && l.anchor.dirty {
		err = l.anchor.sync()
		t.anchorSyncs++
	}
	if err != nil && w.broken == nil {
		if !errors.Is(err, ErrFailed) {
			err = fmt.Errorf("%w: write %s: %v", ErrFailed, l.auditPath, err)
		}
		w.broken = err
	}
	if l.turnHook != nil && len(entries) > 0 {
		l.turnHook(inline, len(entries))
	}
	cp, more := l.account(t, err)
	if b != nil {
		b.err = err
		close(b.done)
	}
	if t.synced && err == nil && l.onSync != nil {
		l.onSync(t.syncTime)
	}
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
	if (w.dirty || l.anchor.dirty) && !w.armed {
		// Not reset while armed: steady traffic must not postpone it.
		l.flushTimer.Reset(l.flushEvery)
		w.armed = true
	}
	if closing {
		l.flushTimer.Stop()
	}
	return more, closing
}

// finishPrep writes a checkpoint or rotation account prepared; wmu must
// be held. Its failure fails the ledger.
func (l *Ledger) finishPrep(cp *cpPrep) {
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
	} else if l.onHead != nil {
		l.onHead(h)
	}
}

// syncJournal is an fdatasync of the journal outside the writer's group
// commit (a checkpoint), reported to OnSync like the writer's.
func (l *Ledger) syncJournal() error {
	start := time.Now()
	if err := datasync(l.journal); err != nil {
		return err
	}
	if l.onSync != nil {
		l.onSync(time.Since(start))
	}
	return nil
}
