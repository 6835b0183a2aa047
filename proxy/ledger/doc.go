// Package ledger is the proxy's durable state and its audit log, in one file.
//
// # One journal
//
// Every decision of the gate is one JSON line in the audit journal (JSON Lines,
// default <state dir>/audit.jsonl): an allowed call, a blocked call, a hold, the
// upstream's outcome of an allowed call, a change of a hold's state, the
// loading of a signed plan, and a lease of calls counted ahead. The journal is also the source of truth for the
// state: at Open the ledger replays it to rebuild, per plan digest, the calls
// forwarded per step, the sequential-order progress and the holds, and per plan
// name the newest signing time loaded.
//
// Why not bbolt beside it: the contract requires at-most-once counting (the count
// is durable before the call is forwarded) and the audit record of that call.
// Keeping both in one append-only file makes them a single write and at most a
// single fdatasync; two stores would need two syncs per call and could disagree
// after a crash. Holds and high-water marks are rare events and ride the same journal, so
// `planlock holds list` can read them while a proxy holds the lock, without a
// second store to keep consistent.
//
// Replay costs about 10µs per record or more (a 1,000,000-record journal
// takes tens of seconds to open), so the ledger keeps <dir>/checkpoint.json: the
// state as of a checkpoint record of the journal. The checkpoint is a cache,
// never a source of truth: the checkpoint record, in the hash chain, carries
// the sha256 of the checkpoint's state bytes, and Open uses the checkpoint
// only when that record is still where the checkpoint says, byte for byte,
// and vouches for exactly that state. Otherwise (an edited count or hold, a
// checkpoint of another journal or of an older planlock, a journal shorter
// than the checkpoint) Open fails with an error naming the file; removing it
// makes Open replay the whole journal. A checkpoint is taken while running
// every 20,000 records at a moment when no record is queued (so the state is
// exactly the journal's), which bounds the replay after a crash, and at a
// clean Close when at least 1,000 records followed the last one. Records
// covered by a checkpoint are not re-verified at Open; `planlock audit
// verify` checks the whole chain.
//
// # Anchor
//
// Nothing inside the journal protects its last records: a journal cut after
// any record still chains. The anchor, <dir>/head, keeps the sequence number
// and hash of the last durable record outside it. It is written, and
// fdatasynced at once, within FlushInterval of a group commit whose
// fdatasync made records durable (never before that fdatasync: after any
// crash the journal is at least as long as its anchor), at each checkpoint
// and at Close; not at every group commit, which would put one more system
// call on the path of every call that waits for its sync, and name a head
// no sooner on disk. Two checksummed slots make a write torn by a crash
// fall back to the previous head. Open
// refuses a journal shorter than its anchor, or whose record at the anchor's
// seq has another hash (ErrTruncated, ErrAnchor), and a missing or damaged
// anchor of a journal that has records or was used before, unless
// Options.AcceptMissingAnchor. Options.OnHead hands the head out at each
// checkpoint and at Close, for shipping elsewhere.
//
// # Rotation and export
//
// With Options.RotateSize or RotateEvery the journal's file is moved aside
// (renamed <stem>.<first seq>-<last seq><ext>, see SegmentName) and a new
// one starts with a segment record: the next seq, prev the old file's last
// hash, and the state inline, so Open never reads archived segments and
// they may be archived elsewhere. The steps are ordered for crashes (see
// rotate.go): Open undoes a rotation stopped before the new file took the
// journal's name. VerifySeries checks a journal's files as one chain;
// Export streams its records as ExportRecord JSON lines (the shape other
// stores of the state reuse through AppendExportLine).
//
// # State files
//
// The state directory is created 0700 and every file in it 0600. Each is
// opened with O_NOFOLLOW and checked on the open descriptor: a symbolic link,
// a file or directory another user can write, or one owned by another uid is
// refused (ErrUnsafe). Files are replaced by a temporary file in the same
// directory renamed over them.
//
// # Durability, group commit and leases
//
// Reserve returns only once the call's count is durable and its allow record
// is written. A record is written by its caller's goroutine when the
// journal is free (no hand-off to another goroutine); records queued while
// a write is under way are batched by the writer goroutine into one write.
// The fdatasync is not part of the write: it runs after it, outside the
// journal's lock, one at a time (the sync lane, synclane.go), so a record
// that needs no sync is written while one is under way. A record that must
// be durable is acknowledged by an fdatasync that began after its write;
// the records written meanwhile share it (group commit). Block and outcome
// records are written at once (they survive a crash of the process) and
// synced with the next sync or by a timer (FlushInterval, 100ms): a machine
// crash loses at most those records, never a count.
//
// A step with few calls left (fewer than 200), a call that consumes a hold,
// and every call under Options.SyncEachCall is counted alone: its allow
// record, which carries the count, is fdatasynced before Reserve returns. A
// step with many calls left is counted in leases: the first call past a
// lease writes a durable lease record that counts the next k calls as used
// (k is 1% of the calls left, at most 256), and the calls inside it return
// once their allow record is written, without an fdatasync of their own.
// Once fewer than k/4 of its calls are left, the next call renews it ahead
// (a lease record through the k calls from it on) without waiting for that
// record's fdatasync; a call past the old lease waits for it, if it is not
// done by then. At most k-1 calls are ever counted ahead. A
// clean Close returns the unused part of each lease with a record; Open after
// a crash counts every lease left open as used, with a record that says so.
// Either way a crash never grants an extra call; a lease can cost a step at
// most k-1 calls it never made, and on a machine crash (not a process crash)
// the allow records written since the last sync may be lost while the lease
// record that covered them stays.
//
// Counting is conservative: the in-memory count is raised before the record is
// written, so a failed write can only lose a call, never grant one. After a
// failed write or fsync the ledger is in a fault (fault.go): it refuses every
// record, tells Options.OnFault, and retries every RetryInterval to take the
// journal up again from disk (state replayed, torn record cut), then takes
// records again.
//
// Every create, rename and write a guarantee depends on is made durable, file
// and directory (fsops.go): a new directory is followed by an fsync of its
// parent, a new name by an fsync of its directory.
//
// # Record format and chain
//
// Each line is a JSON object whose first fields are "seq" (1, 2, 3, ...) and
// "prev", and whose last field is "hash": the sha256 (hex) of the line's bytes
// before `,"hash":`. "prev" is the hash of the previous record (64 zeros for the
// first). An edited record fails its own hash, or, if the editor recomputed it,
// the next record's prev; a removed, inserted or reordered record breaks the seq
// sequence or the chain. Verify names the first bad line. The last record can
// only be protected against a recomputed edit, and the end of the journal
// against removal, by keeping its hash elsewhere: the anchor does so in the
// state directory, Verify returns the head for shipping further, and
// VerifyHead checks a journal against a head kept elsewhere.
//
// A line without its final newline is a torn write from a crash: Verify reports
// it, and Open truncates it (only such a partial last line; a complete but bad
// line makes Open fail, because the state could not be trusted).
//
// # Locking
//
// One proxy per state directory: Open takes an exclusive flock on <dir>/lock and
// on the journal, and a second Open fails with ErrLocked naming the holder's pid.
// A state directory is bound to its journal (<dir>/ledger.json): opening it with
// another audit path, or after its journal vanished, is refused rather than
// silently starting from zero counts.
//
// # Use from the gate
//
//   - Open once per proxy; Close on shutdown.
//   - LoadPlan before serving a plan: the no-downgrade check and its record.
//   - Per tools/call, after the plan's own checks: Reserve (with the order
//     rule as Reservation.Check, so it is atomic with the count). Only a nil
//     error allows forwarding. Then Complete with the upstream's outcome.
//   - A blocked call: Block. A held call: FindHold for the exact call; an
//     approved hold is consumed by Reserve with HoldID; otherwise Hold (which
//     reuses a pending hold for the same call), then UpdateHold with the PR
//     URL and, once decided, approved or rejected.
//   - Progress exposes the current step, which steps are done, held, and
//     their counts.
//
// # One set of rules, two stores
//
// The rules that decide a change (the order check, max_calls, holds, the
// no-downgrade marks, what a record says) are in rules.go, applied to the
// same derived state by the Ledger for a journal file and by the Machine
// for a journal kept elsewhere (package pgstate, PostgreSQL). The stores
// differ in how records reach storage: group commit and a process's lease
// here, transactions and replicas' leases there. Package ledgertest is the
// conformance suite both run, so that they cannot drift apart.
//
// # Public API
//
// ledger is a subpackage of the public package proxy: a program embedding
// the gate opens a Ledger and gives it to proxy.Config as its State, and
// reads holds and the audit journal with it.
package ledger
