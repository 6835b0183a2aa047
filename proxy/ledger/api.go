package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Options configure Open.
type Options struct {
	// Dir is the state directory (created 0700 if missing). Empty means DefaultDir().
	Dir string
	// AuditPath is the journal; empty means <Dir>/audit.jsonl.
	AuditPath string
	// Redact stores the sha256 of the canonical arguments instead of the arguments.
	Redact bool
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
	// FlushInterval bounds how long a record that is written but not yet
	// synced (a block, an outcome, an allow inside a lease) waits for its
	// fdatasync; zero means 100ms.
	FlushInterval time.Duration
	// SyncEachCall makes every allow record durable before Reserve returns,
	// whatever the step's budget: no leases (see Reserve).
	SyncEachCall bool
	// RawAppends appends records to the journal with a raw write(2), not
	// through the scheduler's system call hand-off (Linux; elsewhere it
	// changes nothing). For a proxy serving one stdio client, whose call
	// waits for its record anyway: the hand-off wakes the runtime's
	// monitor thread after every idle moment, and a relay is idle between
	// every message. A caller that runs the sync its record needs itself
	// (the sync lane was idle) makes that fdatasync raw too; the syncer
	// goroutine's syncs keep the hand-off. While such a call blocks
	// (memory pressure, a slow disk), its goroutine keeps its P and a GC
	// pause waits for it; a server of many sessions leaves it off.
	RawAppends bool
	// AcceptMissingAnchor lets Open start when the journal's anchor
	// (<Dir>/head) is missing although the journal has records or the
	// directory was used before: a new anchor is written at the journal's
	// end. Without it Open refuses, since deleting the anchor is how a
	// truncation of the journal would be hidden. For a one-time start after
	// an upgrade or a restored backup, never as a default.
	AcceptMissingAnchor bool
	// StateKey, when set, makes every record written carry a MAC under it,
	// and Open (and a recovery from a disk fault) refuse a journal with a
	// record that lacks one after the first that has one, or whose MAC
	// does not verify (see StateKey). Without it Open refuses a journal
	// whose records carry MACs: a key once used is not dropped.
	StateKey *StateKey
	// AcceptUnkeyedState lets Open take a journal that has records but no
	// MAC at all although StateKey is set: a state written before the key
	// was configured. Open then writes the first record with a MAC. For
	// the one start that introduces the key, never as a default.
	AcceptUnkeyedState bool
	// OnHead, when set, is called with the journal's anchored head after
	// each checkpoint and at Close, so that it can be shipped elsewhere. It
	// runs on the ledger's writer: it must be quick and must not call the
	// Ledger.
	OnHead func(Head)
	// OnSync, when set, is called with the duration of each fdatasync of
	// the journal that succeeded (a group commit, a checkpoint), for a
	// latency metric. It runs one call at a time, after the records the
	// sync made durable were acknowledged: on the ledger's syncer or writer
	// goroutine, or on the goroutine of a call whose own record asked for
	// the sync when none was under way. It must be quick and must not call
	// the Ledger.
	OnSync func(time.Duration)
	// RotateSize and RotateEvery (zero: never) rotate the journal: once its
	// file holds RotateSize bytes, or its first record is RotateEvery old,
	// the file is moved aside as an archived segment (see SegmentName) and
	// a new one starts with a segment record that continues the hash chain
	// and carries the state, at the next moment nothing is queued. Opening
	// the state directory never needs the archived segments.
	RotateSize  int64
	RotateEvery time.Duration
	// OnFault, when set, is told when a write or sync of the state fails
	// (ENOSPC, EIO, EROFS, ...) and the ledger starts refusing every
	// record (err: a *FaultError), and again with nil once it recovered
	// by itself (see RetryInterval): once per change. It runs on the
	// ledger's writer goroutine: it must be quick and must not call the
	// Ledger.
	OnFault func(err error)
	// RetryInterval is how often a ledger in a disk fault tries to take
	// its journal up again; zero means 1s.
	RetryInterval time.Duration

	// trace (tests) is told every file-system operation of the state (see
	// fsops.go).
	trace tracer
}

// Call identifies one tools/call as the gate matched it.
type Call struct {
	PlanDigest string          // digest of the approved plan bytes, e.g. "sha256:..."
	Step       string          // step name
	StepIndex  int             // 0-based position of the step in the plan
	Tool       string          // tool name
	Args       json.RawMessage // arguments as received; nil is treated as {}
	// Caller names who made the call ("token:ci-bot", "jwt:alice"), written
	// in its decision record; empty when the front knows no identity.
	Caller string
}

// Reservation asks to forward one call.
type Reservation struct {
	Call
	// MaxCalls is the step's max_calls (>= 1).
	MaxCalls int
	// HoldID, when set, consumes that approved hold in the same durable record:
	// the hold must be approved, unexpired, unconsumed and bound to this exact
	// call (plan digest, tool, canonical arguments).
	HoldID string
	// OverLimit lets a call that a human approved (HoldID required) pass even
	// when MaxCalls is used up; it is still counted.
	OverLimit bool
	// Check, when set, runs under the ledger's lock with the plan's progress,
	// just before the count is taken: the gate's order rule made atomic with
	// the reservation. A non-nil error is returned by Reserve unchanged and
	// nothing is recorded. It must be fast and must not call the Ledger; it
	// may run twice for one Reserve (a cheap look before the record is
	// encoded, then the deciding one). The Progress it gets is valid only
	// during the call.
	Check func(Progress) error
}

// Ticket is a durable reservation; pass it to Complete once the upstream answered.
type Ticket struct {
	Seq        uint64 // sequence number of the allow record
	PlanDigest string
	Step       string
	StepIndex  int
	Tool       string
	Used       int       // calls of this step forwarded, this one included
	At         time.Time // when the reservation was made
}

// Outcome is the upstream's answer to a forwarded call.
type Outcome struct {
	OK      bool          // false for a transport error, a timeout, or isError
	Err     string        // one line, when !OK
	Latency time.Duration // zero means "since the ticket was issued"
	// HoldStep puts the step on hold (on_error = "hold" after a failure).
	// Such an outcome is durable when Complete returns.
	HoldStep bool
}

// Progress is a plan's sequential-order state and counts.
type Progress struct {
	// Current is the index of the current step: the highest step that had a
	// forwarded call, 0 before any. Steps before it are closed for good.
	Current int
	done    []bool
	used    []int
	held    []bool
}

// Done reports whether step i had at least one successful call.
func (p Progress) Done(i int) bool { return i >= 0 && i < len(p.done) && p.done[i] }

// Held reports whether step i is on hold: a failed call with
// Outcome.HoldStep put it there, and only a reservation that consumes an
// approved hold (Reservation.HoldID) for the step takes it off.
func (p Progress) Held(i int) bool { return i >= 0 && i < len(p.held) && p.held[i] }

// Calls is the number of calls of step i forwarded so far.
func (p Progress) Calls(i int) int {
	if i < 0 || i >= len(p.used) {
		return 0
	}
	return p.used[i]
}

// Local is p as one replica of a shared state sees it (pgstate): unused[i]
// calls of step i fewer, which its own leases cover and it has not handed
// out (Machine.Progress counts them as taken, while the file ledger does
// not count its lease ahead), and step i done where done[i], a success it
// queued and the shared state does not hold yet (the file ledger's
// Complete counts at once). The copy shares nothing with p.
func (p Progress) Local(unused []int, done []bool) Progress {
	q := Progress{Current: p.Current, used: slices.Clone(p.used), done: slices.Clone(p.done), held: slices.Clone(p.held)}
	for i, n := range unused {
		if i < len(q.used) {
			q.used[i] = max(q.used[i]-n, 0)
		}
	}
	for i, d := range done {
		if d {
			for len(q.done) <= i {
				q.done = append(q.done, false)
			}
			q.done[i] = true
		}
	}
	return q
}

// HoldState is the life cycle of a hold.
type HoldState string

// Hold states. Expired is derived from the clock: a pending or approved hold
// past its expiry reads as expired.
const (
	HoldPending  HoldState = "pending"
	HoldApproved HoldState = "approved"
	HoldConsumed HoldState = "consumed"
	HoldRejected HoldState = "rejected"
	HoldExpired  HoldState = "expired"
)

// Hold is a call that waits for a human's approval.
type Hold struct {
	ID         string          `json:"id"`
	PlanDigest string          `json:"plan_digest"`
	Step       string          `json:"step"`
	StepIndex  int             `json:"step_index"`
	Tool       string          `json:"tool"`
	Args       json.RawMessage `json:"args,omitempty"` // canonical; absent when redacted
	ArgsSHA256 string          `json:"args_sha256"`    // sha256 (hex) of the canonical arguments
	Reason     string          `json:"reason"`
	// Cause is what the hold stands for, as the proxy wrote it in
	// HoldSpec.Cause ("" in journals written before causes were recorded).
	Cause string `json:"cause,omitempty"`
	// ObservedPin is the pin value read when the hold was made ("" when the
	// step has no pin or the read failed).
	ObservedPin string `json:"observed_pin,omitempty"`
	// RequestedBy is the caller whose call made the hold ("" when unknown).
	RequestedBy string    `json:"requested_by,omitempty"`
	State       HoldState `json:"state"`
	PRURL       string    `json:"pr_url,omitempty"`
	// PR is the approval pull request's number (0: none, e.g. a hold pushed
	// as a branch only, or approved locally); stored, so that nothing reads
	// it back out of PRURL.
	PR      int       `json:"pr,omitempty"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
	Updated time.Time `json:"updated"`
	// ApprovalSHA256 is the sha256 of the signed approval last verified for
	// the hold (HoldUpdate.Evidence; "" before approvals carried it).
	ApprovalSHA256 string `json:"approval_sha256,omitempty"`
}

// HoldSpec is what a new hold records besides the call.
type HoldSpec struct {
	Reason string
	// Cause is a comma-separated set of reasons the hold stands for (the
	// proxy's vocabulary, e.g. "approval,pin"); the ledger only stores it and
	// compares sets: an open hold is found again for a call only when its
	// cause covers this one ("" reads as "approval").
	Cause string
	// ObservedPin is the pin value read for the call; an open hold is found
	// again only when it observed the same value.
	ObservedPin string
	Expires     time.Time
}

// HoldUpdate changes a hold. Empty fields are left as they are.
type HoldUpdate struct {
	// State may be HoldApproved or HoldRejected, from pending only.
	State HoldState
	// PRURL is the approval pull request.
	PRURL string
	// PR is the approval pull request's number.
	PR int
	// Note is recorded in the audit log with the change.
	Note string
	// Evidence, with State HoldApproved, is the sha256 (hex) of the signed
	// approval the caller verified; the journal keeps it. An approval read
	// back from the journal is not used until the caller verified it again
	// and recorded it once more: GetHold and FindHold show it as pending.
	Evidence string
}

// PlanLoad is a verified plan the proxy is about to run.
type PlanLoad struct {
	Name     string    // plan name (the label of the plan block)
	Digest   string    // digest of the plan bytes
	SignedAt time.Time // transparency-log integrated time, else the signed predicate's time
	// Path is the repository path the plan's signature approves. When set,
	// the no-downgrade mark is kept for it (and Trust), never for Name: an
	// older plan for the same path is refused whatever its plan label, and
	// two plans with one label from different paths do not refuse each
	// other. Without Path the mark is the name's.
	Path string
	// Trust names the trust policy that verified the plan
	// (sign.Policy.Fingerprint); with Path it keys the mark. Marks recorded
	// without one (before marks named their policy) bind every policy.
	Trust string
	// Note is recorded with the load (why a mark was recorded without the
	// plan being served: carried over from an earlier state layout).
	Note string
}

// Stats are counters for operators and benchmarks.
type Stats struct {
	Records uint64 // records written since Open
	Batches uint64 // writes (one per group of records)
	Syncs   uint64 // fdatasync calls since Open
	// SyncTime is the time spent in fdatasync since Open: with Syncs, the
	// disk's latency as the writer sees it under load.
	SyncTime time.Duration
	// AnchorWrites and AnchorSyncs count the anchor's writes and its
	// fdatasyncs: each write is synced at once, at most one per
	// FlushInterval, plus checkpoints, rotations and Close.
	AnchorWrites, AnchorSyncs uint64
	Rotations                 uint64 // journal files rotated out since Open
}

// Errors. Match with errors.Is; the typed errors carry the details.
var (
	ErrExhausted       = errors.New("max_calls used up")
	ErrLocked          = errors.New("state directory in use")
	ErrClosed          = errors.New("ledger closed")
	ErrFailed          = errors.New("ledger failed")
	ErrDowngrade       = errors.New("plan older than one already loaded")
	ErrUnknownHold     = errors.New("unknown hold")
	ErrHoldState       = errors.New("hold not in the required state")
	ErrHoldMismatch    = errors.New("hold is for another call")
	ErrCorrupt         = errors.New("audit log corrupt")
	ErrBinding         = errors.New("state directory bound to another audit log")
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrAnchor: the journal disagrees with its anchor (see AnchorError),
	// or the anchor is missing or damaged.
	ErrAnchor = errors.New("audit log does not match its anchor")
	// ErrTruncated: the journal is shorter than its anchor or checkpoint.
	ErrTruncated = errors.New("audit log truncated")
	// ErrUnsafe: a state file or directory is a symbolic link, not a regular
	// file, owned by another user or writable by other users.
	ErrUnsafe = errors.New("state file not safe")
	// ErrCheckpoint: the checkpoint disagrees with the journal.
	ErrCheckpoint = errors.New("checkpoint does not match the audit log")
)

// ExhaustedError is returned by Reserve when the step's max_calls is used up.
type ExhaustedError struct {
	PlanDigest string
	Step       string
	Used, Max  int
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("step %q: max_calls %d used up (%d calls forwarded)", e.Step, e.Max, e.Used)
}

// Is makes errors.Is(err, ErrExhausted) true.
func (e *ExhaustedError) Is(target error) bool { return target == ErrExhausted }

// DowngradeError is returned by LoadPlan for a plan signed before the newest
// plan of the same name already loaded.
type DowngradeError struct {
	Name             string
	Path             string // set when the signed path's mark refused it
	SignedAt, Newest time.Time
}

func (e *DowngradeError) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("plan %q (signed path %s) signed at %s is older than a plan already loaded from the same path (signed at %s); refusing a downgrade",
			e.Name, e.Path, e.SignedAt.UTC().Format(time.RFC3339), e.Newest.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("plan %q signed at %s is older than the one already loaded (signed at %s); refusing a downgrade",
		e.Name, e.SignedAt.UTC().Format(time.RFC3339), e.Newest.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrDowngrade) true.
func (e *DowngradeError) Is(target error) bool { return target == ErrDowngrade }

// LockedError is returned by Open when another process holds the state directory.
type LockedError struct {
	Dir     string
	PID     int    // the holder's pid; 0 when unknown
	Command string // the holder's command line, as it wrote it in the lock file
}

func (e *LockedError) Error() string {
	holder := "another planlock proxy"
	switch {
	case e.PID > 0 && e.Command != "":
		holder += fmt.Sprintf(" (pid %d: %s)", e.PID, e.Command)
	case e.PID > 0:
		holder += fmt.Sprintf(" (pid %d)", e.PID)
	}
	return fmt.Sprintf("state directory %s is in use by %s, so this one (pid %d: %s) cannot use it: stop the other one, or give this one its own state directory with --state DIR",
		e.Dir, holder, os.Getpid(), commandLine(os.Args))
}

// commandLine is args as one line, quoting the arguments that need it.
func commandLine(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$") {
			a = strconv.Quote(a)
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}

// Is makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// VerifyError names the first bad line of a journal.
type VerifyError struct {
	Line   int  // 1-based
	Torn   bool // the last line has no newline: a write cut by a crash
	Reason string
}

func (e *VerifyError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason) }

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *VerifyError) Is(target error) bool { return target == ErrCorrupt }

// VerifyResult is what Verify found in a good journal.
type VerifyResult struct {
	// Records is the seq of the last record: the number of records of the
	// chain up to the file's end, those of earlier segments included.
	Records int
	Head    string // hash of the last record (64 zeros for an empty journal)
	// First is the seq of the file's first record: 1, or more for a file a
	// rotation started (its first record is a segment record); 0 when the
	// file is empty.
	First uint64
}
