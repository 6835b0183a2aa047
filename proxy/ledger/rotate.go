package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/planlock/planlock/internal/datasync"
)

// Rotation. When Options.RotateSize or RotateEvery is due, the writer, at
// its next turn that asks for a sync (the records queued then go to the old
// file first), moves the journal's file aside and starts a new one:
//
//  1. the old file is fdatasynced through its last record N, whether or
//     not records were queued (records written by earlier turns may still
//     be in memory only), then the anchor is synced at N: the anchor never
//     names a record that is not durable, and the file is archived whole;
//  2. <audit>.next is created and gets one segment record, seq N+1, whose
//     prev is the hash of record N and which carries the state as of N
//     inline (so the new file replays on its own, without the old one) and
//     the old file's new name; it is fdatasynced;
//  3. checkpoint.json (which points into the old file) is removed;
//  4. the old file gets its archived name, <stem>.<first>-<N><ext>, as a
//     second link; then <audit>.next is renamed over <audit>; the
//     directory is synced after each step;
//  5. the anchor and checkpoint.json move to record N+1.
//
// A crash before the rename leaves <audit> the old file, whole: Open removes
// <audit>.next and the archived link of the same file. After the rename the
// anchor may still name record N, which is the new file's first prev.
// Archived segments are not needed to open the state directory again; they
// may be moved elsewhere, and VerifySeries checks them as one chain.

const nextSuffix = ".next"

// SegmentName is the name a journal file gets when the records first..last
// are rotated out of it: audit.jsonl becomes
// audit.000000000001-000000020000.jsonl. The zero padding makes names sort
// in chain order.
func SegmentName(audit string, first, last uint64) string {
	stem, ext := splitExt(filepath.Base(audit))
	return fmt.Sprintf("%s.%012d-%012d%s", stem, first, last, ext)
}

// ParseSegmentName reports whether name is an archived segment of the
// journal audit, and its seq range.
func ParseSegmentName(audit, name string) (first, last uint64, ok bool) {
	stem, ext := splitExt(filepath.Base(audit))
	mid, found := strings.CutPrefix(name, stem+".")
	if !found {
		return 0, 0, false
	}
	if mid, found = strings.CutSuffix(mid, ext); !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(mid, "-")
	if !found || len(a) < 12 || len(b) < 12 {
		return 0, 0, false
	}
	first, err1 := strconv.ParseUint(a, 10, 64)
	last, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil || first < 1 || last < first {
		return 0, 0, false
	}
	return first, last, true
}

func splitExt(base string) (stem, ext string) {
	ext = filepath.Ext(base)
	return strings.TrimSuffix(base, ext), ext
}

// rotateDueLocked reports whether the journal's file should be rotated
// now. Only a turn of the writer calls it (it reads the fields wmu
// guards), with mu held.
func (l *Ledger) rotateDueLocked(now time.Time) bool {
	if l.written < l.fileFirst+1 {
		return false // the file has its first record only: nothing to move aside
	}
	if l.rotateSize > 0 && l.end.size >= l.rotateSize {
		return true
	}
	return l.rotateEvery > 0 && !l.fileStarted.IsZero() && now.Sub(l.fileStarted) >= l.rotateEvery
}

// prepareSegmentLocked is prepareCheckpointLocked for a rotation: the
// segment record that starts the new file.
func (l *Ledger) prepareSegmentLocked() *cpPrep {
	st, err := json.Marshal(l.st.checkpoint())
	if err != nil {
		return nil // only plain data: cannot happen
	}
	sum := sha256.Sum256(st)
	name := SegmentName(l.auditPath, l.fileFirst, l.seq)
	r := record{Time: l.stamp(), Type: typeSegment, StateSHA: hex.EncodeToString(sum[:]), PrevSegment: name, State: st,
		Note: "the journal continues from " + name}
	body, err := encodeBody(&r)
	if err != nil {
		return nil
	}
	l.seq++
	return &cpPrep{seq: l.seq, body: body, state: st, segment: name, at: r.Time}
}

// rotate writes the segment record p to a new file and makes it the
// journal (see the steps above). Only the writer goroutine calls it. Any
// error fails the ledger.
func (l *Ledger) rotate(p *cpPrep) (Head, error) {
	failed := func(step string, err error) (Head, error) {
		return Head{}, fmt.Errorf("%w: rotate %s: %s: %w", ErrFailed, l.auditPath, step, err)
	}
	dir := filepath.Dir(l.auditPath)
	if err := l.flushQueued(p); err != nil {
		return failed("write the queued records", err)
	}
	if err := l.anchor.write(Head{Seq: l.written, Hash: l.head}); err != nil {
		return failed("anchor", err)
	}
	if err := l.anchor.sync(); err != nil {
		return failed("anchor", err)
	}
	next := l.auditPath + nextSuffix
	f, err := l.fs.create("audit log", next, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return failed("create the next file", err)
	}
	if ok, err := tryLock(f); err != nil || !ok {
		f.Close()
		return failed("lock the next file", fmt.Errorf("locked: %v %w", ok, err))
	}
	if err := l.rotateStep("created"); err != nil {
		f.Close()
		return failed("created", err)
	}
	line, hash := appendKeyedLine(nil, p.seq, l.head, p.body, l.key)
	if _, err := f.Write(line); err != nil {
		f.Close()
		return failed("write the segment record", err)
	}
	l.fs.wrote(next, 0, line)
	start := time.Now()
	l.fs.syncing(next)
	if err := datasync.Sync(f); err != nil {
		f.Close()
		return failed("sync the next file", err)
	}
	if l.onSync != nil {
		l.onSync(time.Since(start))
	}
	if err := l.fs.remove(filepath.Join(l.dir, checkpointName)); err != nil {
		f.Close()
		return failed("remove the checkpoint", err)
	}
	if err := l.fs.syncDir(l.dir); err != nil {
		f.Close()
		return failed("sync the state directory", err)
	}
	if err := l.rotateStep("written"); err != nil {
		f.Close()
		return failed("written", err)
	}
	if err := l.fs.link(l.auditPath, filepath.Join(dir, p.segment)); err != nil {
		f.Close()
		return failed("archive", err)
	}
	if err := l.fs.syncDir(dir); err != nil {
		f.Close()
		return failed("sync the audit log's directory", err)
	}
	if err := l.rotateStep("linked"); err != nil {
		f.Close()
		return failed("linked", err)
	}
	if err := l.fs.rename(next, l.auditPath); err != nil {
		f.Close()
		return failed("rename the next file", err)
	}
	if err := l.fs.syncDir(dir); err != nil {
		f.Close()
		return failed("sync the audit log's directory", err)
	}
	old := l.journal
	l.journal = f
	_ = old.Close() // its records are synced; closing releases its lock
	l.end = journalEnd{size: int64(len(line)), lastStart: 0}
	l.head, l.written = hash, p.seq
	l.fileFirst, l.fileStarted = p.seq, p.at
	if err := l.rotateStep("renamed"); err != nil {
		return failed("renamed", err)
	}
	h := Head{Seq: p.seq, Hash: hash}
	if err := l.anchor.write(h); err != nil {
		return failed("anchor", err)
	}
	if err := l.anchor.sync(); err != nil {
		return failed("anchor", err)
	}
	data, err := json.Marshal(checkpoint{Version: checkpointVersion, Audit: l.auditPath, Records: int(p.seq), Head: hash,
		Offset: l.end.size, LastStart: 0, State: p.state})
	if err == nil {
		_ = l.fs.writeStateAtomic("checkpoint", l.dir, checkpointName, data) // a cache
	}
	l.checkpointed(p.seq)
	l.rotated()
	return h, nil
}

// flushQueued writes the records queued before the segment record to the
// old file, fdatasyncs the old file and acknowledges their batch. The sync
// runs even when nothing was queued: the records earlier turns wrote may
// not be durable yet, and the anchor is about to name them.
func (l *Ledger) flushQueued(p *cpPrep) (err error) {
	if p.batch != nil {
		defer func() {
			if err != nil {
				p.batch.err = asFault(fmt.Errorf("%w: write %s: %w", ErrFailed, l.auditPath, err))
			}
			close(p.batch.done)
		}()
	}
	if len(p.entries) == 0 {
		return l.syncJournal(l.written)
	}
	var buf []byte
	lastStart, head := 0, l.head
	for _, e := range p.entries {
		lastStart = len(buf)
		buf, head = appendKeyedLine(buf, e.seq, head, e.body, l.key)
	}
	if _, err := l.journal.Write(buf); err != nil {
		_ = l.journal.Truncate(l.end.size) // best effort, as in the writer
		return err
	}
	l.fs.wrote(l.auditPath, l.end.size, buf)
	l.end.lastStart = l.end.size + int64(lastStart)
	l.end.size += int64(len(buf))
	l.head, l.written = head, p.entries[len(p.entries)-1].seq
	start := time.Now()
	if err := l.syncJournalTo(l.written, false); err != nil {
		return err
	}
	took := time.Since(start)
	l.counted(len(p.entries), took)
	if l.onSync != nil {
		l.onSync(took)
	}
	return nil
}

// rotateStep runs the test hook that stops a rotation at a step, as a crash
// would.
func (l *Ledger) rotateStep(step string) error {
	if l.rotateHook == nil {
		return nil
	}
	return l.rotateHook(step)
}

// counted adds a batch written and synced outside the writer's loop.
func (l *Ledger) counted(records int, took time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stats.Records += uint64(records)
	l.stats.Batches++
	l.stats.Syncs++
	l.stats.SyncTime += took
}

func (l *Ledger) rotated() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stats.Rotations++
}

// recoverRotation undoes, at Open, a rotation a crash stopped before the
// new file took the journal's name: the journal is still the old file,
// whole, so the next file and the old file's archived link go.
func (t tracer) recoverRotation(audit string) error {
	next := audit + nextSuffix
	if _, err := os.Lstat(next); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("recover an unfinished rotation: %w", err)
	}
	dir := filepath.Dir(audit)
	if cur, err := os.Lstat(audit); err == nil {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("recover an unfinished rotation: %w", err)
		}
		for _, e := range entries {
			if _, _, ok := ParseSegmentName(audit, e.Name()); !ok {
				continue
			}
			path := filepath.Join(dir, e.Name())
			if fi, err := os.Lstat(path); err == nil && os.SameFile(fi, cur) {
				if err := t.remove(path); err != nil {
					return fmt.Errorf("recover an unfinished rotation: %w", err)
				}
			}
		}
	}
	if err := t.remove(next); err != nil {
		return fmt.Errorf("recover an unfinished rotation: %w", err)
	}
	if err := t.syncDir(dir); err != nil {
		return fmt.Errorf("recover an unfinished rotation: sync %s: %w", dir, err)
	}
	return nil
}

// fileStartTime is the time of a journal file's first record (zero when the
// file is empty or the time cannot be read).
func fileStartTime(f *os.File) time.Time {
	var t time.Time
	_ = eachLine(ioSection(f), func(_ uint64, line []byte) bool {
		var r struct {
			Time time.Time `json:"time"`
		}
		if json.Unmarshal(line, &r) == nil {
			t = r.Time
		}
		return false
	})
	return t
}
