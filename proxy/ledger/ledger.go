package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// File names inside the state directory.
const (
	lockName    = "lock"
	bindingName = "ledger.json"
	auditName   = "audit.jsonl"
)

// DefaultDir is the default state directory: $XDG_STATE_HOME/planlock, else
// ~/.local/state/planlock.
func DefaultDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "planlock"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the default state directory: %w", err)
	}
	return filepath.Join(home, ".local", "state", "planlock"), nil
}

// Ledger is the open state of one state directory. Its methods are safe for
// concurrent use.
type Ledger struct {
	dir, auditPath string
	redact         bool
	syncEach       bool
	now            func() time.Time
	flushEvery     time.Duration

	lockFile *os.File
	journal  *os.File
	anchor   *anchor // the journal's head outside it (writer only, after Open)
	onHead   func(Head)
	// acceptMissing is Options.AcceptMissingAnchor.
	acceptMissing bool

	mu      sync.Mutex
	st      *state
	seq     uint64     // last sequence number handed out
	head    string     // hash of the last record written (writer only, after Open)
	written uint64     // seq of the last record written (writer only, after Open)
	end     journalEnd // where the journal ends (writer only, after Open)
	pending []entry    // records waiting for the writer, in seq order
	cur     *batch     // the batch the pending records belong to
	closed  bool       // Close was called
	failed  error      // a write or fsync failed: the ledger refuses further work
	stats   Stats      // written by the writer under mu
	// checkpointEvery is how many records the writer lets pass between
	// checkpoints while running, which bounds the replay after a crash.
	checkpointEvery uint64
	checkpointAt    uint64 // stats.Records at the last checkpoint
	// lastCheckpoint is the seq of the newest checkpoint record; Close
	// writes one when at least closeCheckpointMin records followed it (a
	// short journal replays in milliseconds, and need not grow by a record
	// at each restart).
	lastCheckpoint     uint64
	closeCheckpointMin uint64
	kick               chan struct{}
	stopped            chan struct{}
}

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

// Open opens (creating if needed) a state directory, takes its lock, replays
// its journal and starts the writer. The caller must Close it.
func Open(ctx context.Context, o Options) (*Ledger, error) {
	dir, audit, err := resolvePaths(o)
	if err != nil {
		return nil, err
	}
	if err := prepareDir("state directory", dir); err != nil {
		return nil, err
	}
	l := &Ledger{
		dir: dir, auditPath: audit, redact: o.Redact, syncEach: o.SyncEachCall, now: o.Now, flushEvery: o.FlushInterval,
		st: newState(), kick: make(chan struct{}, 1), stopped: make(chan struct{}),
		checkpointEvery: 20_000, closeCheckpointMin: 1000, onHead: o.OnHead, acceptMissing: o.AcceptMissingAnchor,
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
	go l.writer()
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
	flags := os.O_RDWR | os.O_APPEND
	if !bound {
		flags |= os.O_CREATE
		if err := os.MkdirAll(filepath.Dir(l.auditPath), 0o700); err != nil {
			return fmt.Errorf("create the audit log's directory: %w", err)
		}
	}
	if err := checkParent("audit log", filepath.Dir(l.auditPath)); err != nil {
		return err
	}
	f, err := openState("audit log", l.auditPath, flags)
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
		if err := createAnchor(l.dir, Head{Seq: uint64(rp.res.Records), Hash: rp.res.Head}); err != nil {
			f.Close()
			return fmt.Errorf("write anchor: %w", err)
		}
	}
	if l.anchor, err = openAnchor(l.dir, slot); err != nil {
		f.Close()
		return err
	}
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
	rp, err := replayFile(l.dir, l.auditPath, f, at)
	var ve *VerifyError
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
		if err := datasync(f); err != nil {
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
	return rp, nil
}

func (l *Ledger) bind() error {
	// The journal's directory entry must be durable before the binding
	// points at it.
	if err := syncDir(filepath.Dir(l.auditPath)); err != nil {
		return fmt.Errorf("sync %s: %w", filepath.Dir(l.auditPath), err)
	}
	data, _ := json.Marshal(binding{Audit: l.auditPath})
	if err := writeStateAtomic("state binding", l.dir, bindingName, append(data, '\n')); err != nil {
		return fmt.Errorf("write %s: %w", bindingName, err)
	}
	return nil
}

// Dir is the state directory; AuditPath the journal.
func (l *Ledger) Dir() string { return l.dir }

// AuditPath is the journal's absolute path.
func (l *Ledger) AuditPath() string { return l.auditPath }

// Stats returns the writer's counters.
func (l *Ledger) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

// Close writes and syncs what is pending, stops the writer and releases the
// locks. Calls after Close return ErrClosed.
func (l *Ledger) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	if l.failed == nil {
		l.returnLeases()
	}
	l.closed = true
	l.mu.Unlock()
	l.signal()
	<-l.stopped
	l.mu.Lock()
	var cp *cpPrep
	if l.failed == nil && l.seq > 0 && l.seq-l.lastCheckpoint >= l.closeCheckpointMin {
		// Everything is written and synced and the state matches it
		// exactly: the next Open can start here.
		cp = l.prepareCheckpoint()
	}
	failed := l.failed
	l.mu.Unlock()
	var err error
	head := Head{Seq: l.written, Hash: l.head}
	if cp != nil {
		if head, err = l.finishCheckpoint(cp); err != nil {
			l.mu.Lock()
			l.failed = err
			l.mu.Unlock()
		}
	}
	if failed == nil && err == nil && l.onHead != nil {
		l.onHead(head)
	}
	if cerr := l.anchor.close(); err == nil {
		err = cerr
	}
	if cerr := l.journal.Close(); err == nil {
		err = cerr
	}
	if lerr := l.lockFile.Close(); err == nil {
		err = lerr
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed != nil {
		return l.failed
	}
	return err
}

func (l *Ledger) signal() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// usable reports why the ledger cannot take a record. Call with mu held.
func (l *Ledger) usable() error {
	if l.closed {
		return ErrClosed
	}
	if l.failed != nil {
		return l.failed
	}
	return nil
}

// enqueue hands a record to the writer and returns its seq and batch. Call
// with mu held, after usable.
func (l *Ledger) enqueue(body []byte, durable bool) (uint64, *batch) {
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
	l.mu.Lock()
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return err
	}
	if apply != nil {
		if err := apply(); err != nil {
			l.mu.Unlock()
			return err
		}
	}
	_, b := l.enqueue(body, durable)
	l.mu.Unlock()
	l.signal()
	if durable {
		return wait(ctx, b)
	}
	return nil
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
		// anchor updates since the counters were last added to stats
		anchorWrites, anchorSyncs uint64
		timer                     = time.NewTimer(time.Hour)
	)
	timer.Stop()
	for {
		var flush bool
		select {
		case <-l.kick:
		case <-timer.C:
			flush, armed = true, false
		}
		l.mu.Lock()
		entries, b, closing := l.pending, l.cur, l.closed
		l.pending, l.cur = spare[:0], nil
		l.mu.Unlock()

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
		}
		synced := false
		var syncTime time.Duration
		if err == nil && dirty && (flush || closing || (b != nil && b.sync)) {
			start := time.Now()
			err = datasync(l.journal)
			syncTime = time.Since(start)
			dirty, synced = false, true
			if err == nil {
				// Only now, once they are durable, may the anchor name
				// these records. Its own sync waits for the timer.
				err = l.anchor.write(Head{Seq: l.written, Hash: l.head})
				anchorWrites++
			}
		}
		if err == nil && (flush || closing) && l.anchor.dirty {
			err = l.anchor.sync()
			anchorSyncs++
		}
		if err != nil && broken == nil {
			if !errors.Is(err, ErrFailed) {
				err = fmt.Errorf("%w: write %s: %v", ErrFailed, l.auditPath, err)
			}
			broken = err
		}
		l.mu.Lock()
		if len(entries) > 0 {
			l.stats.Records += uint64(len(entries))
			l.stats.Batches++
		}
		if synced {
			l.stats.Syncs++
			l.stats.SyncTime += syncTime
		}
		l.stats.AnchorWrites += anchorWrites
		l.stats.AnchorSyncs += anchorSyncs
		anchorWrites, anchorSyncs = 0, 0
		if err != nil && l.failed == nil {
			l.failed = err
		}
		var cp *cpPrep
		if err == nil && synced && !closing && len(l.pending) == 0 &&
			l.checkpointEvery > 0 && l.stats.Records-l.checkpointAt >= l.checkpointEvery {
			// Nothing is queued, so the state is exactly what the journal
			// holds up to l.end: every change of it is made together with
			// the enqueue of its record, under mu.
			cp = l.prepareCheckpoint()
			l.checkpointAt = l.stats.Records + 1
		}
		l.mu.Unlock()
		if b != nil {
			b.err = err
			close(b.done)
		}
		if cp != nil {
			// Written before any record queued after it took its seq.
			h, cerr := l.finishCheckpoint(cp)
			if cerr != nil {
				broken = cerr
				l.mu.Lock()
				if l.failed == nil {
					l.failed = cerr
				}
				l.mu.Unlock()
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

func (l *Ledger) stamp() time.Time { return l.now().UTC() }

// argsFields fills the record's arguments: raw, or their digest when redacted.
func (l *Ledger) argsFields(r *record, args json.RawMessage) error {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if l.redact {
		d, err := ArgsDigest(args)
		if err != nil {
			return err
		}
		r.ArgsSHA = d
		return nil
	}
	r.Args = args // encodeBody refuses it if it is not JSON
	return nil
}

// Reserve takes one call of the step's max_calls and returns once the allow
// record that carries the count is durable; only then may the call be
// forwarded. It returns an *ExhaustedError when max_calls is used up, the
// Check function's error, or a hold error when HoldID does not fit. Any error
// means: do not forward. (After a context cancellation the count may still
// have been taken.)
func (l *Ledger) Reserve(ctx context.Context, rv Reservation) (Ticket, error) {
	if rv.MaxCalls < 1 {
		return Ticket{}, fmt.Errorf("%w: max_calls %d < 1", ErrInvalidArgument, rv.MaxCalls)
	}
	if rv.StepIndex < 0 {
		return Ticket{}, fmt.Errorf("%w: step index %d", ErrInvalidArgument, rv.StepIndex)
	}
	if rv.OverLimit && rv.HoldID == "" {
		return Ticket{}, fmt.Errorf("%w: OverLimit needs an approved hold", ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return Ticket{}, err // the client is gone: take nothing
	}
	// A refused call costs no encoding: look first, and again below once
	// the record is ready, since the state may change in between.
	l.mu.Lock()
	if err := l.precheck(rv); err != nil {
		l.mu.Unlock()
		return Ticket{}, err
	}
	l.mu.Unlock()
	now := l.stamp()
	r := record{Time: now, Type: typeDecision, Decision: DecisionAllow, Plan: rv.PlanDigest,
		Step: rv.Step, StepIndex: &rv.StepIndex, Tool: rv.Tool, Hold: rv.HoldID, Max: rv.MaxCalls}
	if err := l.argsFields(&r, rv.Args); err != nil {
		return Ticket{}, err
	}
	var argsSHA string
	if rv.HoldID != "" {
		d, err := ArgsDigest(rv.Args)
		if err != nil {
			return Ticket{}, err
		}
		argsSHA = d
	}
	body, err := encodeBody(&r)
	if err != nil {
		return Ticket{}, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}

	l.mu.Lock()
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return Ticket{}, err
	}
	if err := l.precheck(rv); err != nil {
		l.mu.Unlock()
		return Ticket{}, err
	}
	var h *Hold
	if rv.HoldID != "" {
		if h, err = l.approvedHold(rv.HoldID, rv.Call, argsSHA, now); err != nil {
			l.mu.Unlock()
			return Ticket{}, err
		}
	}
	i := rv.StepIndex
	p := l.st.plan(rv.PlanDigest)
	p.grow(i)
	// The count is taken before the record is durable: a failed write can
	// only lose a call, never grant one.
	used := p.used[i] + 1
	var lease *batch // a lease record this call must wait for
	durable := true
	if h == nil && !l.syncEach {
		if used <= p.leased[i] {
			lease, durable = p.leaseBatch[i], false
		} else if k := leaseSize(rv.MaxCalls, used-1); k > 1 {
			lr := record{Time: now, Type: typeLease, Plan: rv.PlanDigest, Step: rv.Step, StepIndex: &i,
				Tool: rv.Tool, Max: rv.MaxCalls, Through: used - 1 + k}
			lbody, err := encodeBody(&lr)
			if err != nil {
				l.mu.Unlock()
				return Ticket{}, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
			}
			_, lease = l.enqueue(lbody, true)
			p.leased[i], p.leaseBatch[i] = lr.Through, lease
			durable = false
		}
	}
	p.used[i], p.names[i] = used, rv.Step
	p.current = max(p.current, i)
	if h != nil {
		h.State, h.Updated = HoldConsumed, now
		p.held[i] = false
	}
	body = append(body, `,"used":`...)
	body = strconv.AppendInt(body, int64(used), 10)
	seq, b := l.enqueue(body, durable)
	l.mu.Unlock()
	l.signal()

	// Written (and durable, unless a durable lease covers the count) before
	// the call may be forwarded.
	if err := wait(ctx, b); err != nil {
		return Ticket{}, err
	}
	if lease != nil && lease != b {
		if err := wait(ctx, lease); err != nil {
			return Ticket{}, err
		}
	}
	return Ticket{Seq: seq, PlanDigest: rv.PlanDigest, Step: rv.Step, StepIndex: rv.StepIndex,
		Tool: rv.Tool, Used: used, At: now}, nil
}

// A lease (see the package doc) counts at most 1/leaseShare of a step's
// calls left and at most leaseMax ahead, so a crash costs a step at most 1% of
// what was left; fewer than 2*leaseShare calls left are counted one by one.
const (
	leaseMax   = 256
	leaseShare = 100
)

// leaseSize is how many calls a new lease covers once used of maxCalls are
// taken; below 2 the call is counted alone.
func leaseSize(maxCalls, used int) int {
	left := maxCalls - used
	if left <= 0 {
		return 0
	}
	return min(leaseMax, left/leaseShare)
}

// openLeases calls fn for every step whose lease is not used up, in a
// stable order. Call with mu held.
func (l *Ledger) openLeases(fn func(digest string, i int, p *planState)) {
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
	now := l.stamp()
	var last *batch
	l.mu.Lock()
	l.openLeases(func(d string, i int, p *planState) {
		idx := i
		r := record{Time: now, Type: typeLease, Plan: d, Step: p.names[i], StepIndex: &idx, Used: p.leased[i], Through: p.leased[i],
			Note: fmt.Sprintf("the proxy stopped without closing its state; the %d calls leased but not recorded count as used", p.leased[i]-p.used[i])}
		body, err := encodeBody(&r)
		if err != nil {
			return // only plain data: cannot happen
		}
		p.used[i] = p.leased[i]
		_, last = l.enqueue(body, true)
	})
	l.mu.Unlock()
	if last == nil {
		return nil
	}
	l.signal()
	if err := wait(ctx, last); err != nil {
		return fmt.Errorf("count the calls of an unclosed lease: %w", err)
	}
	return nil
}

// returnLeases gives back, at Close, what is left of every lease. Call with
// mu held, before the writer's last batch.
func (l *Ledger) returnLeases() {
	now := l.stamp()
	l.openLeases(func(d string, i int, p *planState) {
		idx := i
		r := record{Time: now, Type: typeLease, Plan: d, Step: p.names[i], StepIndex: &idx, Used: p.used[i], Through: p.used[i],
			Note: fmt.Sprintf("%d leased calls returned at shutdown", p.leased[i]-p.used[i])}
		if body, err := encodeBody(&r); err == nil {
			p.leased[i] = p.used[i]
			l.enqueue(body, false)
		}
	})
}

// precheck applies the gate's Check and max_calls, in the contract's order
// (order before max_calls). Call with mu held.
func (l *Ledger) precheck(rv Reservation) error {
	p := l.st.plans[rv.PlanDigest]
	if p == nil {
		p = &planState{}
	}
	if rv.Check != nil {
		if err := rv.Check(Progress{Current: p.current, done: p.done, used: p.used, held: p.held}); err != nil {
			return err
		}
	}
	used := 0
	if rv.StepIndex < len(p.used) {
		used = p.used[rv.StepIndex]
	}
	if used >= rv.MaxCalls && !rv.OverLimit {
		return &ExhaustedError{PlanDigest: rv.PlanDigest, Step: rv.Step, Used: used, Max: rv.MaxCalls}
	}
	return nil
}

// approvedHold returns the hold if it may be consumed by this call. Call with
// mu held.
func (l *Ledger) approvedHold(id string, c Call, argsSHA string, now time.Time) (*Hold, error) {
	h := l.st.holds[id]
	if h == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownHold, id)
	}
	if h.PlanDigest != c.PlanDigest || h.Tool != c.Tool || h.ArgsSHA256 != argsSHA {
		return nil, fmt.Errorf("%w: hold %s approves another call", ErrHoldMismatch, id)
	}
	if st := view(h, now).State; st != HoldApproved {
		return nil, fmt.Errorf("%w: hold %s is %s, not approved", ErrHoldState, id, st)
	}
	return h, nil
}

// Complete records the upstream's outcome of a reserved call; a success marks
// the step done. The record is written at once but synced with the next
// reservation (or within the flush interval): Complete does not wait for disk,
// unless o.HoldStep puts the step on hold, which must survive a crash.
func (l *Ledger) Complete(ctx context.Context, t Ticket, o Outcome) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := l.stamp()
	lat := o.Latency
	if lat == 0 && !t.At.IsZero() {
		lat = now.Sub(t.At)
	}
	ms := float64(lat.Microseconds()) / 1000
	ok := o.OK
	r := record{Time: now, Type: typeOutcome, Plan: t.PlanDigest, Step: t.Step, StepIndex: &t.StepIndex,
		Tool: t.Tool, Ref: t.Seq, OK: &ok, LatencyMS: &ms, HoldStep: o.HoldStep}
	if !ok {
		r.Error = firstLine(o.Err)
		if r.Error == "" {
			r.Error = "failed"
		}
	}
	return l.commit(ctx, &r, o.HoldStep, func() error {
		if t.StepIndex >= 0 {
			p := l.st.plan(t.PlanDigest)
			p.grow(t.StepIndex)
			if ok {
				p.done[t.StepIndex] = true
			}
			if o.HoldStep {
				p.held[t.StepIndex] = true
			}
		}
		return nil
	})
}

// Block records a blocked call. Like Complete, it does not wait for disk.
func (l *Ledger) Block(ctx context.Context, c Call, reason string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return l.commitCallRecord(ctx, typeDecision, DecisionBlock, c, reason)
}

// commitCallRecord writes a record about one call that changes no count (a
// block, an observed call) without waiting for disk.
func (l *Ledger) commitCallRecord(ctx context.Context, typ, decision string, c Call, reason string) error {
	r := record{Time: l.stamp(), Type: typ, Decision: decision, Plan: c.PlanDigest,
		Step: c.Step, Tool: c.Tool, Reason: firstLine(reason)}
	if c.Step != "" {
		r.StepIndex = &c.StepIndex
	}
	if err := l.argsFields(&r, c.Args); err != nil {
		return err
	}
	return l.commit(ctx, &r, false, nil)
}

// Hold records a held call with no recorded cause; see NewHold.
func (l *Ledger) Hold(ctx context.Context, c Call, reason string, expires time.Time) (Hold, error) {
	return l.NewHold(ctx, c, HoldSpec{Reason: reason, Expires: expires})
}

// NewHold records a held call. If a pending or approved, unexpired hold
// exists for the same call (plan digest, tool, canonical arguments) whose
// cause covers spec.Cause and that observed the same pin value, the decision
// refers to it and it is returned (an approved one is for the caller to
// consume with Reserve); otherwise a new pending hold is created, durable on
// return, and becomes the call's hold.
// Its arguments are kept in canonical form (only their digest when redacted).
func (l *Ledger) NewHold(ctx context.Context, c Call, spec HoldSpec) (Hold, error) {
	canon, err := CanonicalArgs(c.Args)
	if err != nil {
		return Hold{}, err
	}
	sha, _ := ArgsDigest(canon)
	now := l.stamp()
	key := holdKey{c.PlanDigest, c.Tool, sha}
	reason := spec.Reason

	l.mu.Lock()
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return Hold{}, err
	}
	if id, ok := l.st.byKey[key]; ok {
		h := l.st.holds[id]
		if st := view(h, now).State; (st == HoldPending || st == HoldApproved) && CauseCovers(h.Cause, spec.Cause) && h.ObservedPin == spec.ObservedPin {
			r := record{Time: now, Type: typeDecision, Decision: DecisionHold, Plan: c.PlanDigest,
				Step: c.Step, StepIndex: &c.StepIndex, Tool: c.Tool, ArgsSHA: sha, Reason: firstLine(reason), Hold: id}
			body, err := encodeBody(&r)
			if err != nil {
				l.mu.Unlock()
				return Hold{}, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
			}
			l.enqueue(body, false)
			out := view(h, now)
			l.mu.Unlock()
			l.signal()
			return out, nil
		}
	}
	id, err := newHoldID()
	if err != nil {
		l.mu.Unlock()
		return Hold{}, err
	}
	h := &Hold{ID: id, PlanDigest: c.PlanDigest, Step: c.Step, StepIndex: c.StepIndex, Tool: c.Tool,
		ArgsSHA256: sha, Reason: firstLine(reason), Cause: spec.Cause, ObservedPin: firstLine(spec.ObservedPin),
		State: HoldPending, Created: now, Updated: now, Expires: spec.Expires.UTC()}
	if !l.redact {
		h.Args = canon
	}
	exp := h.Expires
	r := record{Time: now, Type: typeDecision, Decision: DecisionHold, Plan: c.PlanDigest,
		Step: c.Step, StepIndex: &c.StepIndex, Tool: c.Tool, Args: h.Args, ArgsSHA: sha,
		Reason: h.Reason, Hold: id, HoldState: HoldPending, Expires: &exp, Cause: h.Cause, ObservedPin: h.ObservedPin}
	body, err := encodeBody(&r)
	if err != nil {
		l.mu.Unlock()
		return Hold{}, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	l.st.addHold(h)
	_, b := l.enqueue(body, true)
	out := view(h, now)
	l.mu.Unlock()
	l.signal()
	if err := wait(ctx, b); err != nil {
		return Hold{}, err
	}
	return out, nil
}

// CauseCovers reports whether the comma-separated cause set have includes
// every element of want. An empty set reads as "approval": a hold recorded
// before causes were, stands for an approval and nothing more.
func CauseCovers(have, want string) bool {
	if have == "" {
		have = "approval"
	}
	if want == "" {
		want = "approval"
	}
	set := strings.Split(have, ",")
	for _, w := range strings.Split(want, ",") {
		if !slices.Contains(set, w) {
			return false
		}
	}
	return true
}

// UpdateHold approves or rejects a pending hold and/or sets its pull
// request's URL. It returns the hold as updated, durable on return.
func (l *Ledger) UpdateHold(ctx context.Context, id string, u HoldUpdate) (Hold, error) {
	if u.State != "" && u.State != HoldApproved && u.State != HoldRejected {
		return Hold{}, fmt.Errorf("%w: a hold can only be set to approved or rejected, not %q", ErrInvalidArgument, u.State)
	}
	now := l.stamp()
	l.mu.Lock()
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return Hold{}, err
	}
	h := l.st.holds[id]
	if h == nil {
		l.mu.Unlock()
		return Hold{}, fmt.Errorf("%w %q", ErrUnknownHold, id)
	}
	if st := view(h, now).State; u.State != "" && st != HoldPending {
		l.mu.Unlock()
		return Hold{}, fmt.Errorf("%w: hold %s is %s; only a pending hold can be %s", ErrHoldState, id, st, u.State)
	}
	r := record{Time: now, Type: typeHoldUpdate, Plan: h.PlanDigest, Step: h.Step, Tool: h.Tool,
		Hold: id, HoldState: u.State, PRURL: u.PRURL, PR: prNumber(u.PR, u.PRURL), Note: firstLine(u.Note)}
	body, err := encodeBody(&r)
	if err != nil {
		l.mu.Unlock()
		return Hold{}, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	if u.State != "" {
		h.State = u.State
	}
	if u.PRURL != "" {
		h.PRURL, h.PR = u.PRURL, r.PR
	}
	h.Updated = now
	_, b := l.enqueue(body, true)
	out := view(h, now)
	l.mu.Unlock()
	l.signal()
	if err := wait(ctx, b); err != nil {
		return Hold{}, err
	}
	return out, nil
}

// GetHold returns a hold by id.
func (l *Ledger) GetHold(id string) (Hold, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.st.holds[id]
	if h == nil {
		return Hold{}, false
	}
	return view(h, l.stamp()), true
}

// FindHold returns the newest hold for exactly this call (plan digest, tool,
// canonical arguments), whatever its state.
func (l *Ledger) FindHold(c Call) (Hold, bool) {
	sha, err := ArgsDigest(c.Args)
	if err != nil {
		return Hold{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	id, ok := l.st.byKey[holdKey{c.PlanDigest, c.Tool, sha}]
	if !ok {
		return Hold{}, false
	}
	return view(l.st.holds[id], l.stamp()), true
}

// ListHolds returns all holds in creation order.
func (l *Ledger) ListHolds() []Hold {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st.listHolds(l.stamp())
}

// Progress returns a copy of the plan's order state and counts.
func (l *Ledger) Progress(planDigest string) Progress {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st.progress(planDigest)
}

// CheckNotOlder returns a *DowngradeError when a plan of this name signed
// later than signedAt was loaded before.
func (l *Ledger) CheckNotOlder(planName string, signedAt time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checkNotOlder(PlanLoad{Name: planName, SignedAt: signedAt})
}

// pathMark is the key of a signed path's high-water mark in state.newest,
// next to the plan names' marks: a plan name has no ':' (hclplan), so the
// two never collide, and checkpoints carry both unchanged.
func pathMark(path string) string { return "path:" + path }

func (l *Ledger) checkNotOlder(p PlanLoad) error {
	if newest, ok := l.st.newest[p.Name]; ok && p.SignedAt.Before(newest) {
		return &DowngradeError{Name: p.Name, SignedAt: p.SignedAt, Newest: newest}
	}
	if p.Path != "" {
		if newest, ok := l.st.newest[pathMark(p.Path)]; ok && p.SignedAt.Before(newest) {
			return &DowngradeError{Name: p.Name, Path: p.Path, SignedAt: p.SignedAt, Newest: newest}
		}
	}
	return nil
}

// LoadPlan checks the no-downgrade rule and records the plan as loaded,
// raising the high-water marks of its name and of its signed path; durable
// on return. A plan signed at the same time as the newest (the same plan,
// restarted) is accepted.
func (l *Ledger) LoadPlan(ctx context.Context, p PlanLoad) error {
	if p.Name == "" || p.SignedAt.IsZero() {
		return fmt.Errorf("%w: a loaded plan needs a name and a signing time", ErrInvalidArgument)
	}
	p.SignedAt = p.SignedAt.UTC()
	signed := p.SignedAt
	r := record{Time: l.stamp(), Type: typePlanLoaded, Plan: p.Digest, PlanName: p.Name, SignedAt: &signed, SignedPath: p.Path}
	return l.commit(ctx, &r, true, func() error {
		if err := l.checkNotOlder(p); err != nil {
			return err
		}
		l.st.raise(p.Name, p.Path, signed)
		return nil
	})
}

func newHoldID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("hold id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// firstLine keeps what the journal records of a reason, error, note or
// observed pin to its first line, cut with " …". It is not oneline.Of on
// purpose: a stored observed pin is compared with later holds' values, so
// the way journals already written cut them must not change.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i] + " …"
	}
	return s
}
