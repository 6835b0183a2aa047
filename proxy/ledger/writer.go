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
// waits once the helper returned. The writer goroutine owns the journal's
// end (head, written, end) and the files without the lock.

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
	l.signal()
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

// takePending hands the queued records and their batch to the writer,
// leaving spare as the new queue.
func (l *Ledger) takePending(spare []entry) (entries []entry, b *batch, closing bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	entries, b, closing = l.pending, l.cur, l.closed
	l.pending, l.cur = spare[:0], nil
	return entries, b, closing
}

// turn is what one turn of the writer did, for the counters.
type turn struct {
	records                   int
	synced                    bool
	syncTime                  time.Duration
	anchorWrites, anchorSyncs uint64
	closing                   bool
}

// account adds a turn of the writer to the counters, records its failure
// and, when one is due and nothing is queued, prepares a checkpoint.
func (l *Ledger) account(w turn, err error) *cpPrep {
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
		return nil
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
		return cp
	}
	if w.synced && !w.closing && len(l.pending) == 0 &&
		l.checkpointEvery > 0 && l.stats.Records-l.checkpointAt >= l.checkpointEvery {
		// Nothing is queued, so the state is exactly what the journal
		// holds up to l.end: every change of it is made together with
		// the enqueue of its record, under mu.
		cp := l.prepareCheckpointLocked()
		l.checkpointAt = l.stats.Records + 1
		return cp
	}
	return nil
}

// writer is the only goroutine that writes the journal: it takes all pending
// records, writes them with one write and, if one of them needs it, one
// fdatasync (group commit). Records that need no sync are synced by a timer.
func (l *Ledger) writer() {
	defer close(l.stopped)
	var (
		buf    []byte
		spare  []entry
		dirty  bool
		armed  bool  // the timer runs: it syncs what is dirty at the latest flushEvery after the first unsynced write
		broken error // after a failed write nothing more is written
		timer  = time.NewTimer(time.Hour)
	)
	timer.Stop()
	for {
		var flush bool
		select {
		case <-l.kick:
		case <-timer.C:
			flush, armed = true, false
		}
		entries, b, closing := l.takePending(spare)
		w := turn{records: len(entries), closing: closing}

		err := broken
		if err == nil && len(entries) > 0 {
			buf = buf[:0]
			lastStart := 0
			for _, e := range entries {
				lastStart = len(buf)
				buf, l.head = appendLine(buf, e.seq, l.head, e.body)
			}
			_, err = l.journal.Write(buf)
			if err == nil {
				l.end.lastStart = l.end.size + int64(lastStart)
				l.end.size += int64(len(buf))
			} else {
				// Best effort: drop a partial write so the journal still
				// ends on a whole record.
				_ = l.journal.Truncate(l.end.size)
			}
			dirty = true
		}
		if err == nil && len(entries) > 0 {
			l.written = entries[len(entries)-1].seq
			if l.fileStarted.IsZero() {
				l.fileStarted = l.stamp() // a new journal's first record, for RotateEvery
			}
		}
		if err == nil && dirty && (flush || closing || (b != nil && b.sync)) {
			start := time.Now()
			err = datasync(l.journal)
			w.syncTime = time.Since(start)
			dirty, w.synced = false, true
			if err == nil {
				// Only now, once they are durable, may the anchor name
				// these records. Its own sync waits for the timer.
				err = l.anchor.write(Head{Seq: l.written, Hash: l.head})
				w.anchorWrites++
			}
		}
		if err == nil && (flush || closing) && l.anchor.dirty {
			err = l.anchor.sync()
			w.anchorSyncs++
		}
		if err != nil && broken == nil {
			if !errors.Is(err, ErrFailed) {
				err = fmt.Errorf("%w: write %s: %v", ErrFailed, l.auditPath, err)
			}
			broken = err
		}
		cp := l.account(w, err)
		if b != nil {
			b.err = err
			close(b.done)
		}
		if w.synced && err == nil && l.onSync != nil {
			l.onSync(w.syncTime)
		}
		if cp != nil {
			// Written before any record queued after it took its seq.
			var h Head
			var cerr error
			if cp.segment != "" {
				h, cerr = l.rotate(cp)
			} else {
				h, cerr = l.finishCheckpoint(cp)
			}
			if cerr != nil {
				broken = cerr
				l.fail(cerr)
			} else if l.onHead != nil {
				l.onHead(h)
			}
		}
		clear(entries)
		spare = entries
		if (dirty || l.anchor.dirty) && !armed {
			// Not reset while armed: steady traffic must not postpone it.
			timer.Reset(l.flushEvery)
			armed = true
		}
		if closing {
			timer.Stop()
			return
		}
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
