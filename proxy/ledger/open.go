package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/planlock/planlock/internal/datasync"
)

// Open opens (creating if needed) a state directory, takes its lock, replays
// its journal and starts the writer. The caller must Close it.
func Open(ctx context.Context, o Options) (*Ledger, error) {
	dir, audit, err := resolvePaths(o)
	if err != nil {
		return nil, err
	}
	if err := tracer(o.trace).prepareDir("state directory", dir); err != nil {
		return nil, err
	}
	l := &Ledger{
		dir: dir, auditPath: audit, redact: o.Redact, syncEach: o.SyncEachCall, rawAppends: o.RawAppends, now: o.Now, flushEvery: o.FlushInterval,
		st: newState(), kick: make(chan struct{}, 1), stopped: make(chan struct{}),
		syncKick: make(chan struct{}, 1), syncQuit: make(chan struct{}), syncStopped: make(chan struct{}),
		checkpointEvery: 20_000, closeCheckpointMin: 1000, onHead: o.OnHead, onSync: o.OnSync,
		rotateSize: o.RotateSize, rotateEvery: o.RotateEvery, acceptMissing: o.AcceptMissingAnchor,
		key: o.StateKey, acceptUnkeyed: o.AcceptUnkeyedState,
		fs: o.trace, onFault: o.OnFault, retryInterval: o.RetryInterval,
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.flushEvery <= 0 {
		l.flushEvery = 100 * time.Millisecond
	}
	if err := l.lockDir(); err != nil {
		return nil, err
	}
	if err := l.openJournal(ctx); err != nil {
		l.lockFile.Close()
		return nil, err
	}
	// Stopped until a turn leaves something unsynced. Since Go 1.23 a
	// stopped or reset timer delivers no stale tick.
	l.flushTimer = time.NewTimer(time.Hour)
	l.flushTimer.Stop()
	l.lane.written = Head{Seq: l.written, Hash: l.head}
	l.lane.durable = l.written // replay synced a torn tail's cut; the rest was read back from disk
	go l.syncer()
	go l.writer()
	if err := l.writeKeySwitch(ctx); err != nil {
		l.Close()
		return nil, err
	}
	if err := l.settleLeases(ctx); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func resolvePaths(o Options) (dir, audit string, err error) {
	dir = o.Dir
	if dir == "" {
		if dir, err = DefaultDir(); err != nil {
			return "", "", err
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return "", "", fmt.Errorf("state directory: %w", err)
	}
	audit = o.AuditPath
	if audit == "" {
		audit = filepath.Join(dir, auditName)
	}
	if audit, err = filepath.Abs(audit); err != nil {
		return "", "", fmt.Errorf("audit log: %w", err)
	}
	return dir, audit, nil
}

func (l *Ledger) lockDir() error {
	path := filepath.Join(l.dir, lockName)
	f, err := openState("lock file", path, os.O_RDWR|os.O_CREATE)
	if err != nil {
		return fmt.Errorf("open lock file: %w", err)
	}
	ok, err := tryLock(f)
	if err != nil {
		f.Close()
		return fmt.Errorf("lock %s: %w", path, err)
	}
	if !ok {
		b, _ := io.ReadAll(io.LimitReader(f, 4096))
		f.Close()
		first, rest, _ := strings.Cut(string(b), "\n")
		pid, _ := strconv.Atoi(strings.TrimSpace(first))
		return &LockedError{Dir: l.dir, PID: pid, Command: strings.TrimSpace(rest)}
	}
	// The pid and command line are only for the message a second process
	// prints: it names the holder.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"+commandLine(os.Args)+"\n"), 0)
	}
	l.lockFile = f
	return nil
}

// binding records which journal holds a state directory's counts, so that a
// changed --audit or a deleted journal cannot silently reset them.
type binding struct {
	Audit string `json:"audit"`
}

func readBinding(dir string) (binding, bool, error) {
	var b binding
	data, err := readState("state binding", filepath.Join(dir, bindingName), 1<<16)
	if errors.Is(err, os.ErrNotExist) {
		return b, false, nil
	}
	if err != nil {
		return b, false, fmt.Errorf("read %s: %w", bindingName, err)
	}
	if err := json.Unmarshal(data, &b); err != nil || b.Audit == "" {
		return b, false, fmt.Errorf("%s in %s is not valid; it names the audit log that holds this directory's state", bindingName, dir)
	}
	return b, true, nil
}

func (l *Ledger) openJournal(ctx context.Context) error {
	b, bound, err := readBinding(l.dir)
	if err != nil {
		return err
	}
	if bound && b.Audit != l.auditPath {
		return fmt.Errorf("%w: state directory %s keeps its call counts in audit log %s, not %s; use that --audit or another --state directory",
			ErrBinding, l.dir, b.Audit, l.auditPath)
	}
	if err := l.fs.recoverRotation(l.auditPath); err != nil {
		return err
	}
	flags := os.O_RDWR | os.O_APPEND
	if !bound {
		flags |= os.O_CREATE
		if err := l.fs.mkdirAll(filepath.Dir(l.auditPath)); err != nil {
			return fmt.Errorf("create the audit log's directory: %w", err)
		}
	}
	if err := checkParent("audit log", filepath.Dir(l.auditPath)); err != nil {
		return err
	}
	var f *os.File
	if bound {
		f, err = openState("audit log", l.auditPath, flags)
	} else {
		f, err = l.fs.create("audit log", l.auditPath, flags) // its entry is synced by bind
	}
	if bound && errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: audit log %s of state directory %s is missing, so its call counts are lost; refusing to start from zero (remove %s to accept that)",
			ErrBinding, l.auditPath, l.dir, filepath.Join(l.dir, bindingName))
	}
	if err != nil {
		return fmt.Errorf("open audit log: %w", err)
	}
	ok, err := tryLock(f)
	if err == nil && !ok {
		err = fmt.Errorf("%w: audit log %s is in use by another planlock proxy", ErrLocked, l.auditPath)
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("lock audit log: %w", err)
	}
	// The anchor is read before the journal: while a proxy runs, the
	// journal is never shorter than an anchor read earlier.
	ah, slot, anchored, err := readAnchor(l.dir)
	if err != nil {
		f.Close()
		return err
	}
	var want *Head
	if anchored {
		want = &ah
	}
	rp, err := l.replay(ctx, f, want)
	if err != nil {
		f.Close()
		return err
	}
	if !anchored {
		if (bound || rp.res.Records > 0) && !l.acceptMissing {
			f.Close()
			return fmt.Errorf("%w: the anchor %s of audit log %s (%d records) is missing, and deleting it is how a truncation of the log would be hidden; refusing to start. If you know why it is missing (an upgrade from a planlock without anchors, a restored backup), check the log against a head kept elsewhere and start once with --accept-missing-anchor",
				ErrAnchor, filepath.Join(l.dir, anchorName), l.auditPath, rp.res.Records)
		}
		if err := l.fs.createAnchor(l.dir, Head{Seq: uint64(rp.res.Records), Hash: rp.res.Head}); err != nil {
			f.Close()
			return fmt.Errorf("write anchor: %w", err)
		}
	}
	if !anchored {
		ah.Seq = uint64(rp.res.Records) // what createAnchor wrote
	}
	if l.anchor, err = openAnchor(l.dir, slot, ah.Seq); err != nil {
		f.Close()
		return err
	}
	l.anchor.fs = l.fs
	if !bound {
		if err := l.bind(); err != nil {
			l.anchor.close()
			f.Close()
			return err
		}
	}
	l.journal = f
	return nil
}

// replay rebuilds the state from the journal (from the checkpoint on, when
// it matches the journal), checks it against its anchor (when there is one)
// and cuts a torn last line.
func (l *Ledger) replay(ctx context.Context, f *os.File, anchor *Head) (*replayed, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	at := ^uint64(0)
	if anchor != nil {
		at = anchor.Seq
	}
	var ve *VerifyError
	kr := newKeyRule(l.key)
	rp, err := replayFile(l.dir, l.auditPath, f, at, kr)
	if err == nil || errors.As(err, &ve) && ve.Torn {
		if kerr := kr.finish(l.auditPath, l.acceptUnkeyed); kerr != nil {
			return nil, kerr
		}
	}
	l.keySwitch, l.unkeyed = kr.needsSwitch(), kr.unkeyed
	if anchor != nil && (err == nil || errors.As(err, &ve) && ve.Torn) {
		// Before anything is cut: a journal that does not reach its
		// anchor is left as it is for the operator to look at.
		if aerr := rp.checkAnchor(f, *anchor); aerr != nil {
			return nil, fmt.Errorf("%s: %w; nothing is forwarded from a journal whose end was removed or rewritten (check it with planlock audit verify --anchor %s)",
				l.auditPath, aerr, filepath.Join(l.dir, anchorName))
		}
	}
	good := rp.end.size
	switch {
	case errors.As(err, &ve) && ve.Torn:
		// Only the unsynced tail of a crashed write: no caller was told it
		// was durable, so it is dropped and the chain continues.
		if err := f.Truncate(good); err != nil {
			return nil, fmt.Errorf("truncate the torn last line of %s: %w", l.auditPath, err)
		}
		l.fs.truncated(l.auditPath, good)
		l.fs.syncing(l.auditPath)
		if err := datasync.Sync(f); err != nil {
			return nil, fmt.Errorf("sync %s: %w", l.auditPath, err)
		}
	case errors.Is(err, ErrCheckpoint), errors.Is(err, ErrUnsafe):
		return nil, fmt.Errorf("%w; refusing to start", err)
	case err != nil:
		return nil, fmt.Errorf("%s: %w; the state cannot be trusted, refusing to start (check it with planlock audit verify)", l.auditPath, err)
	}
	l.st = rp.st
	l.seq = uint64(rp.res.Records)
	l.written = l.seq
	l.head = rp.res.Head
	l.end = rp.end
	l.lastCheckpoint = uint64(rp.cp.Records)
	l.fileFirst = max(rp.res.First, 1)
	l.fileStarted = fileStartTime(f)
	return rp, nil
}

func (l *Ledger) bind() error {
	// The journal's directory entry must be durable before the binding
	// points at it.
	if err := l.fs.syncDir(filepath.Dir(l.auditPath)); err != nil {
		return fmt.Errorf("sync %s: %w", filepath.Dir(l.auditPath), err)
	}
	data, _ := json.Marshal(binding{Audit: l.auditPath})
	if err := l.fs.writeStateAtomic("state binding", l.dir, bindingName, append(data, '\n')); err != nil {
		return fmt.Errorf("write %s: %w", bindingName, err)
	}
	return nil
}

// writeKeySwitch writes the state_key record, the first with a MAC, when
// a state key is given and no record read back had one (a new state, or
// one written before the key was configured and accepted as it is).
func (l *Ledger) writeKeySwitch(ctx context.Context) error {
	if !l.keySwitch {
		return nil
	}
	r := record{Time: l.stamp(), Type: typeStateKey, Note: stateKeyNote(l.key, l.unkeyed)}
	if err := l.commit(ctx, &r, true, nil); err != nil {
		return fmt.Errorf("write the state_key record: %w", err)
	}
	l.keySwitch = false
	return nil
}
