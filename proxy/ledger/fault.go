package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/planlock/planlock/internal/datasync"
)

// Disk faults. A write or fdatasync of the journal, or of the anchor, a
// checkpoint or a rotation, that fails (ENOSPC, EIO, EROFS, ...) puts the
// ledger in a fault: every record is refused with a *FaultError (so no call
// is forwarded that could not be counted), Options.OnFault is told once,
// and the writer goroutine tries every RetryInterval to take the journal
// up again. A try reopens the journal from disk as Open does: it finishes
// or undoes a rotation the fault stopped, cuts a torn last record, replays
// the state from the journal (the in-memory state, which counted calls
// whose records were never written, is replaced by what the journal
// holds), counts every lease left open as used, fdatasyncs the journal and
// anchors its head. Only when all of that succeeded does the ledger take
// records again, and OnFault is told (with nil) once more. The records
// that were queued when the fault began are dropped: a caller that waited
// for one got the error; an outcome or block record that was not waited for
// is lost, as in a crash of the process.

// ErrUnavailable: the state cannot be written right now (a *FaultError);
// the ledger refuses records until it can again.
var ErrUnavailable = errors.New("state cannot be written")

// FaultError is the error of every record refused during a disk fault. Its
// Error names the files (for the operator); Public says what happened
// without a local path, for a message to a client.
type FaultError struct {
	Err error // the failed operation, with its path
}

func (e *FaultError) Error() string {
	return e.Err.Error() + "; calls are refused until the state can be written again"
}

func (e *FaultError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnavailable) true (and ErrFailed, through Err).
func (e *FaultError) Is(target error) bool { return target == ErrUnavailable }

// Public is the fault as a client may read it: the cause, no path.
func (e *FaultError) Public() string {
	cause := "an I/O error"
	var errno syscall.Errno
	if errors.As(e.Err, &errno) {
		cause = errno.Error()
	}
	return "the proxy's state cannot be written (" + cause + "); calls are refused until it can be written again"
}

// asFault makes err the ledger's fault.
func asFault(err error) *FaultError {
	var fe *FaultError
	if errors.As(err, &fe) {
		return fe
	}
	return &FaultError{Err: err}
}

// Fault is the current disk fault (a *FaultError), nil while the ledger
// takes records.
func (l *Ledger) Fault() error { return l.failure() }

// noteFault tells OnFault about a change of the fault state since it was
// last told; only the writer goroutine calls it. It returns whether the
// ledger is in a fault.
func (l *Ledger) noteFault() bool {
	err := l.failure()
	if (err != nil) != l.faultTold {
		l.faultTold = err != nil
		if l.onFault != nil {
			l.onFault(err)
		}
	}
	return err != nil
}

// recoverFault is one try to take the journal up again after a fault; on
// the writer goroutine.
func (l *Ledger) recoverFault() {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.failure() == nil || l.isClosed() {
		return
	}
	l.acquireLane()
	h, err := l.reopenJournal()
	l.endFault(err == nil)
	l.releaseLane(h, err == nil)
}

// endFault refuses whoever still waits for a sync asked before the fault
// (its record may be lost, so its call, counted, is not sent) and, when
// the journal was taken up again (ok), ends the fault.
func (l *Ledger) endFault(ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ackLocked(l.lane.waiters, l.failed)
	l.lane.waiters, l.lane.want, l.lane.anchor = nil, false, false
	if ok {
		l.failed = nil
		l.w.broken = nil
		l.checkpointAt = l.stats.Records
	}
}

// dropQueued refuses the records queued when the fault began.
func (l *Ledger) dropQueued() {
	l.mu.Lock()
	defer l.mu.Unlock()
	ackLocked([]*batch{l.cur}, l.failed)
	ackLocked(l.ahead, l.failed)
	l.pending, l.cur, l.ahead = l.pending[:0], nil, nil
}

// install makes the state replayed into tmp, its journal f and anchor an
// the ledger's.
func (l *Ledger) install(tmp *Ledger, f *os.File, an *anchor) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.st, l.seq, l.written, l.head, l.end = tmp.st, tmp.written, tmp.written, tmp.head, tmp.end
	l.lastCheckpoint, l.fileFirst, l.fileStarted = tmp.lastCheckpoint, tmp.fileFirst, tmp.fileStarted
	l.journal, l.anchor = f, an
}

func (l *Ledger) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// reopenJournal is recoverFault's disk work, with wmu and the lane held:
// it reopens the journal and the anchor and, under mu, installs the state
// replayed from them. It returns the journal's durable head.
func (l *Ledger) reopenJournal() (Head, error) {
	l.w.cp = nil // its seq is given again: the state is the journal's
	l.dropQueued()

	if err := l.fs.recoverRotation(l.auditPath); err != nil {
		return Head{}, err
	}
	f, err := openState("audit log", l.auditPath, os.O_RDWR|os.O_APPEND)
	if err != nil {
		return Head{}, fmt.Errorf("reopen the audit log: %w", err)
	}
	same, err := sameOpenFile(f, l.journal)
	if err != nil {
		f.Close()
		return Head{}, err
	}
	if same {
		// Its descriptor holds the journal's lock: a second one would
		// lose it when the first closes.
		f.Close()
		f = l.journal
	} else if locked, err := tryLock(f); err != nil || !locked {
		// A rotation gave the journal's name to its next file, which
		// holds no lock yet.
		f.Close()
		return Head{}, fmt.Errorf("lock the audit log: locked elsewhere %t: %w", !locked, err)
	}
	ok := false
	defer func() {
		if !ok && f != l.journal {
			f.Close()
		}
	}()
	ah, slot, anchored, err := readAnchor(l.dir)
	if err != nil {
		return Head{}, err
	}
	if !anchored {
		return Head{}, fmt.Errorf("%w: the anchor of %s is missing", ErrAnchor, l.auditPath)
	}
	tmp := &Ledger{dir: l.dir, auditPath: l.auditPath, fs: l.fs, now: l.now, st: newState(), key: l.key, acceptUnkeyed: true}
	if _, err := tmp.replay(context.Background(), f, &ah); err != nil {
		return Head{}, err
	}
	// Leases left open may have covered calls whose allow records were
	// lost with the fault: they count as used, as after a crash.
	tmp.settleLeasesQueue(l.stamp())
	if len(tmp.pending) > 0 {
		var buf []byte
		start, head := tmp.end.size, tmp.head
		lastStart := 0
		for _, e := range tmp.pending {
			lastStart = len(buf)
			buf, head = appendKeyedLine(buf, e.seq, head, e.body, l.key)
		}
		if _, err := f.Write(buf); err != nil {
			_ = f.Truncate(start)
			return Head{}, fmt.Errorf("%w: write %s: %w", ErrFailed, l.auditPath, err)
		}
		l.fs.wrote(l.auditPath, start, buf)
		tmp.end = journalEnd{size: start + int64(len(buf)), lastStart: start + int64(lastStart)}
		tmp.head, tmp.written = head, tmp.seq
	}
	// What the page cache holds may never have reached the disk (a failed
	// fdatasync): the journal is synced before the anchor names it.
	l.fs.syncing(l.auditPath)
	if err := datasync.Sync(f); err != nil {
		return Head{}, fmt.Errorf("%w: sync %s: %w", ErrFailed, l.auditPath, err)
	}
	an, err := openAnchor(l.dir, slot, ah.Seq)
	if err != nil {
		return Head{}, err
	}
	an.fs = l.fs
	h := Head{Seq: tmp.written, Hash: tmp.head}
	err = an.write(h)
	if err == nil {
		err = an.sync()
	}
	if err != nil {
		an.close()
		return Head{}, err
	}
	ok = true
	oldJournal, oldAnchor := l.journal, l.anchor
	l.install(tmp, f, an)
	_ = oldAnchor.close()
	if oldJournal != f {
		_ = oldJournal.Close()
	}
	return h, nil
}

// sameOpenFile reports whether f and g are the same file.
func sameOpenFile(f, g *os.File) (bool, error) {
	a, err := f.Stat()
	if err != nil {
		return false, err
	}
	b, err := g.Stat()
	if err != nil {
		return false, nil // the old descriptor is gone: not the same
	}
	return os.SameFile(a, b), nil
}

// retryEvery is how often the writer tries to take the journal up again.
func (l *Ledger) retryEvery() time.Duration {
	if l.retryInterval > 0 {
		return l.retryInterval
	}
	return time.Second
}
