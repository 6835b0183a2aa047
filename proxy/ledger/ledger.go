package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
	rawAppends     bool // Options.RawAppends
	now            func() time.Time
	flushEvery     time.Duration

	// wmu is the journal's (see writer.go): after Open, the files, the
	// journal's end (head, written, end, fileFirst, fileStarted) and w
	// belong to whoever holds it; the anchor and the journal's fdatasync
	// to the sync lane's runner (see synclane.go).
	wmu        sync.Mutex
	w          writerState
	flushTimer *time.Timer                    // syncs what turns left unsynced; armed under mu (lane.armed)
	turnHook   func(inline bool, records int) // tests: called under wmu by each turn that wrote records
	// syncHook (tests) replaces the group commit's fdatasync of the
	// journal, which covers the records through seq (raw: see syncOnce);
	// set before use.
	syncHook func(f *os.File, seq uint64, raw bool) error
	// writeHook (tests) replaces the writer's append of records to the
	// journal; set before use.
	writeHook func(f *os.File, b []byte) (int, error)

	lockFile *os.File
	journal  *os.File
	anchor   *anchor // the journal's head outside it
	onHead   func(Head)
	onSync   func(time.Duration)
	// Rotation (Options.RotateSize, RotateEvery); fileFirst and
	// fileStarted (the seq and time of the journal file's first record)
	// are the writer's (under wmu), after Open.
	rotateSize  int64
	rotateEvery time.Duration
	fileFirst   uint64
	fileStarted time.Time
	rotateHook  func(step string) error // tests: a non-nil error stops a rotation there, as a crash would
	// acceptMissing is Options.AcceptMissingAnchor.
	acceptMissing bool
	// key is Options.StateKey (nil: records carry no MAC), acceptUnkeyed
	// Options.AcceptUnkeyedState; keySwitch is set by a replay that found
	// no record with a MAC, so Open writes the state_key record, after
	// unkeyed records written before (their number).
	key           *StateKey
	acceptUnkeyed bool
	keySwitch     bool
	unkeyed       int
	// fs makes the state's files durable and traces their operations
	// (Options.trace; fsops.go).
	fs tracer
	// Disk faults (fault.go): Options.OnFault and RetryInterval;
	// faultTold is what OnFault was last told (the writer goroutine's).
	onFault       func(error)
	retryInterval time.Duration
	faultTold     bool

	mu      sync.Mutex
	st      *state
	seq     uint64     // last sequence number handed out
	head    string     // hash of the last record written (under wmu, after Open)
	written uint64     // seq of the last record written (under wmu, after Open)
	end     journalEnd // where the journal ends (under wmu, after Open)
	pending []entry    // records waiting for the writer, in seq order
	cur     *batch     // the batch the pending records belong to
	ahead   []*batch   // leases renewed ahead among pending: synced for their own batch
	closed  bool       // Close was called
	failed  error      // a write or fsync failed: the ledger refuses further work
	stats   Stats      // written by the turns of the writer under mu
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
	// lane is the sync lane's state (synclane.go), under mu; the syncer
	// goroutine runs the syncs no caller ran.
	lane                            syncLane
	syncKick, syncQuit, syncStopped chan struct{}
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
	if !l.markClosed() {
		return nil
	}
	l.signal()
	<-l.stopped
	return l.closeJournal()
}

// closeJournal is Close once the writer goroutine ran its last turn: no
// turn runs after it, but a caller's writeInline may still try for wmu.
func (l *Ledger) closeJournal() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	cp, failed := l.closeCheckpoint()
	var err error
	head := Head{Seq: l.written, Hash: l.head}
	if cp != nil {
		l.acquireLane() // free: the syncer stopped with the writer
		if head, err = l.finishCheckpoint(cp); err != nil {
			l.fail(err)
		}
		l.releaseLane(head, err == nil)
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
	if ferr := l.failure(); ferr != nil {
		return ferr
	}
	return err
}

// markClosed refuses further records and returns the leases' unused calls
// (as records for the writer's last batch); false when Close already ran.
func (l *Ledger) markClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	if l.failed == nil {
		l.returnLeasesLocked()
	}
	l.closed = true
	return true
}

// closeCheckpoint prepares the checkpoint Close writes, if one is due, once
// the writer stopped, and returns the ledger's failure.
func (l *Ledger) closeCheckpoint() (*cpPrep, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed == nil && l.seq > 0 && l.seq-l.lastCheckpoint >= l.closeCheckpointMin {
		// Everything is written and synced and the state matches it
		// exactly: the next Open can start here.
		return l.prepareCheckpointLocked(), nil
	}
	return nil, l.failed
}

// fail records the ledger's first failure: it refuses every record after it.
func (l *Ledger) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failLocked(err)
}

// failLocked puts the ledger in a fault (fault.go); the writer goroutine
// reports it and tries to recover.
func (l *Ledger) failLocked(err error) {
	if l.failed == nil {
		l.failed = asFault(err)
		l.signal()
	}
}

// failure is the ledger's failure, nil while it works.
func (l *Ledger) failure() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

func (l *Ledger) stamp() time.Time { return l.now().UTC() }

// argsFields fills the record's arguments: raw, or their digest when
// redacted. The file ledger and the Machine both record calls with it.
func argsFields(r *record, args json.RawMessage, redact bool) error {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if redact {
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
	if err := checkReservation(&rv); err != nil {
		return Ticket{}, err
	}
	if err := ctx.Err(); err != nil {
		return Ticket{}, err // the client is gone: take nothing
	}
	// The checks run once, under the lock, with the record ready (reserve):
	// a refused call costs an encoding, every granted one a lock less.
	now := l.stamp()
	body, argsSHA, err := allowBody(&rv, l.redact, now)
	if err != nil {
		return Ticket{}, err
	}
	t, b, lease, err := l.reserve(rv, body, argsSHA, now)
	if err != nil {
		return Ticket{}, err
	}
	l.writeQueued()
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
	return t, nil
}

// reserve takes the count and queues the allow record body (and a lease
// record, when the count starts a lease). It returns the ticket, the batch
// of the allow record and the batch of the lease the call must wait for
// (nil: none).
func (l *Ledger) reserve(rv Reservation, body []byte, argsSHA string, now time.Time) (Ticket, *batch, *batch, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return Ticket{}, nil, nil, err
	}
	taken := 0
	if p := l.st.plans[rv.PlanDigest]; p != nil && rv.StepIndex < len(p.used) {
		taken = p.used[rv.StepIndex]
	}
	h, err := l.st.admit(&rv, l.st.planView(rv.PlanDigest), taken, argsSHA, now)
	if err != nil {
		return Ticket{}, nil, nil, err
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
		k := leaseSize(rv.MaxCalls, used-1)
		leaseRecord := func() ([]byte, int, error) {
			lr := record{Time: now, Type: typeLease, Plan: rv.PlanDigest, Step: rv.Step, StepIndex: &i,
				Tool: rv.Tool, Max: rv.MaxCalls, Through: used - 1 + k}
			lbody, err := encodeBody(&lr)
			if err != nil {
				return nil, 0, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
			}
			return lbody, lr.Through, nil
		}
		switch {
		case used <= p.leased[i]:
			durable = false
			if used > p.leaseFrom[i] {
				lease = p.leaseBatch[i]
			}
			if k > 1 && p.leased[i]-used < k/renewAt && used-1+k > p.leased[i] && isDone(p.leaseBatch[i]) {
				// Renewed ahead: a lease record through used-1+k, as the
				// first call past the lease would write, but this call
				// does not wait for it (its own count is in the durable
				// lease), and the calls after it find it durable.
				lbody, through, err := leaseRecord()
				if err != nil {
					return Ticket{}, nil, nil, err
				}
				ahead := l.enqueueAheadLocked(lbody)
				p.leaseFrom[i], p.leased[i], p.leaseBatch[i] = p.leased[i], through, ahead
			}
		case k > 1:
			lbody, through, err := leaseRecord()
			if err != nil {
				return Ticket{}, nil, nil, err
			}
			_, lease = l.enqueueLocked(lbody, true)
			p.leaseFrom[i], p.leased[i], p.leaseBatch[i] = used-1, through, lease
			durable = false
		}
	}
	l.st.take(&rv, h, now)
	seq, b := l.enqueueLocked(appendUsed(body, used), durable)
	return Ticket{Seq: seq, PlanDigest: rv.PlanDigest, Step: rv.Step, StepIndex: rv.StepIndex,
		Tool: rv.Tool, Used: used, At: now}, b, lease, nil
}

// Complete records the upstream's outcome of a reserved call; a success marks
// the step done. The record is written at once but synced with the next
// reservation (or within the flush interval): Complete does not wait for disk,
// unless o.HoldStep puts the step on hold, which must survive a crash.
func (l *Ledger) Complete(ctx context.Context, t Ticket, o Outcome) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r, apply := l.outcome(t, o)
	return l.commit(ctx, r, o.HoldStep, apply)
}

// CompleteLater is Complete for a caller that answers its client before the
// record is written: the outcome counts at once (Progress shows the step
// done, and every record queued after it follows it in the journal), but
// its record is only queued, and write, which the caller runs once it has
// answered, writes it if nothing else did meanwhile. What that costs: a
// process that dies between the answer and write loses the record, as it
// loses the record of a call in flight; the call stays counted (its allow
// record was written before it was sent) and its step is not marked done.
// An outcome that puts its step on hold is not put off (write does nothing).
func (l *Ledger) CompleteLater(ctx context.Context, t Ticket, o Outcome) (write func(), err error) {
	if o.HoldStep {
		return func() {}, l.Complete(ctx, t, o)
	}
	if err := ctx.Err(); err != nil {
		return func() {}, err
	}
	r, apply := l.outcome(t, o)
	body, err := encodeBody(r)
	if err != nil {
		return func() {}, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	if _, err := l.queue(body, false, apply); err != nil {
		return func() {}, err
	}
	return func() { l.writeQueuedFor(false) }, nil
}

// outcome is the record of a call's outcome and its change to the state.
func (l *Ledger) outcome(t Ticket, o Outcome) (*record, func() error) {
	r := outcomeRecord(t, o, l.stamp())
	return &r, func() error { l.st.outcome(t, o); return nil }
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
	r, err := callRecord(typ, decision, c, reason, l.redact, l.stamp())
	if err != nil {
		return err
	}
	return l.commit(ctx, &r, false, nil)
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
	return l.checkNotOlderLocked(PlanLoad{Name: planName, SignedAt: signedAt})
}

// checkNotOlderLocked is CheckNotOlder; mu must be held.
func (l *Ledger) checkNotOlderLocked(p PlanLoad) error { return l.st.downgrade(p) }

// LoadPlan checks the no-downgrade rule and records the plan as loaded,
// raising the high-water mark of its signed path under its trust policy
// (of its name, without a path); durable on return. A plan signed at the
// same time as the newest (the same plan, restarted) is accepted.
func (l *Ledger) LoadPlan(ctx context.Context, p PlanLoad) error {
	p, r, err := planLoad(p, l.stamp())
	if err != nil {
		return err
	}
	return l.commit(ctx, &r, true, func() error { return l.st.loadPlan(p) })
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
