package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

const (
	checkpointName = "checkpoint.json"
	// checkpointVersion 2: the state is bound to a checkpoint record of the
	// journal. Version 1 (no version field) was trusted on its own.
	checkpointVersion = 2
	// maxCheckpoint bounds what Open reads of checkpoint.json.
	maxCheckpoint = 1 << 30
)

// checkpoint is the state as of a checkpoint record of the journal, so that
// Open replays only what came after. It is a cache, never a source of truth:
// the journal's checkpoint record (at LastStart, seq Records, hash Head)
// carries the sha256 of State's exact bytes, so a state that was edited does
// not load. A checkpoint that does not match its journal makes Open fail,
// naming the file: removing it makes Open replay the whole journal.
type checkpoint struct {
	Version   int             `json:"version"`
	Audit     string          `json:"audit"`
	Records   int             `json:"records"`
	Head      string          `json:"head"`       // hash of record number Records, a checkpoint record
	Offset    int64           `json:"offset"`     // journal bytes covered
	LastStart int64           `json:"last_start"` // offset of the checkpoint record's line
	State     json.RawMessage `json:"state"`      // a cpState; its sha256 is in the checkpoint record
	line      []byte          // the checkpoint record's line, as read back
}

// cpState is the derived state a checkpoint record vouches for.
type cpState struct {
	Plans  map[string]cpPlan    `json:"plans"`
	Holds  []*Hold              `json:"holds"` // creation order, stored state
	Newest map[string]time.Time `json:"newest"`
}

type cpPlan struct {
	Current int      `json:"current"`
	Used    []int    `json:"used"`
	Done    []bool   `json:"done"`
	Held    []bool   `json:"held"`
	Leased  []int    `json:"leased,omitempty"`
	Names   []string `json:"names,omitempty"`
}

func (s *state) checkpoint() cpState {
	cp := cpState{Plans: map[string]cpPlan{}, Newest: s.newest}
	for d, p := range s.plans {
		cp.Plans[d] = cpPlan{Current: p.current, Used: p.used, Done: p.done, Held: p.held, Leased: p.leased, Names: p.names}
	}
	for _, id := range s.order {
		cp.Holds = append(cp.Holds, s.holds[id])
	}
	return cp
}

func (cp *cpState) state() *state {
	s := newState()
	for d, p := range cp.Plans {
		ps := &planState{current: p.Current}
		n := max(len(p.Used), len(p.Done), len(p.Held), len(p.Leased), len(p.Names))
		// Keep the per-step slices the same length whatever the file says.
		ps.grow(n - 1)
		copy(ps.used, p.Used)
		copy(ps.done, p.Done)
		copy(ps.held, p.Held)
		copy(ps.leased, p.Leased)
		copy(ps.names, p.Names)
		s.plans[d] = ps
	}
	for _, h := range cp.Holds {
		if h != nil && h.ID != "" {
			s.addHold(h)
		}
	}
	for n, t := range cp.Newest {
		s.newest[n] = t
	}
	return s
}

// cpPrep is a checkpoint record taken under mu, to be written by the writer
// (or by Close once the writer stopped) before any later record.
type cpPrep struct {
	seq   uint64
	body  []byte
	state []byte
	// segment, for a rotation, is the name the old file gets; at is the
	// segment record's time.
	segment string
	at      time.Time
	// entries and batch, for a rotation, are the records queued before
	// the segment record: written to the old file first.
	entries []entry
	batch   *batch
}

// prepareCheckpointLocked snapshots the state and takes the next seq for
// its checkpoint record. Call when no record is queued, so the state is
// exactly the journal's.
func (l *Ledger) prepareCheckpointLocked() *cpPrep {
	st, err := json.Marshal(l.st.checkpoint())
	if err != nil {
		return nil // only plain data: cannot happen
	}
	sum := sha256.Sum256(st)
	r := record{Time: l.stamp(), Type: typeCheckpoint, StateSHA: hex.EncodeToString(sum[:])}
	body, err := encodeBody(&r)
	if err != nil {
		return nil
	}
	l.seq++
	return &cpPrep{seq: l.seq, body: body, state: st}
}

// finishCheckpoint writes and syncs the checkpoint record, syncs the anchor
// at it, then replaces checkpoint.json. Only the writer goroutine, or Close
// after it stopped, calls it. An error of the journal or the anchor fails the
// ledger; checkpoint.json itself is a cache and its write may fail.
func (l *Ledger) finishCheckpoint(p *cpPrep) (Head, error) {
	line, hash := appendKeyedLine(nil, p.seq, l.head, p.body, l.key)
	start := l.end.size
	if _, err := l.journal.Write(line); err != nil {
		_ = l.journal.Truncate(l.end.size)
		return Head{}, fmt.Errorf("%w: write %s: %w", ErrFailed, l.auditPath, err)
	}
	l.fs.wrote(l.auditPath, start, line)
	l.end = journalEnd{size: start + int64(len(line)), lastStart: start}
	l.head, l.written = hash, p.seq
	if err := l.syncJournal(p.seq); err != nil {
		return Head{}, fmt.Errorf("%w: write %s: %w", ErrFailed, l.auditPath, err)
	}
	h := Head{Seq: p.seq, Hash: hash}
	// The anchor is durable at the checkpoint before the checkpoint is, so
	// it never lags a checkpoint.
	if err := l.anchor.write(h); err != nil {
		return Head{}, err
	}
	if err := l.anchor.sync(); err != nil {
		return Head{}, err
	}
	data, err := json.Marshal(checkpoint{Version: checkpointVersion, Audit: l.auditPath, Records: int(p.seq), Head: hash,
		Offset: l.end.size, LastStart: l.end.lastStart, State: p.state})
	if err == nil {
		_ = l.fs.writeStateAtomic("checkpoint", l.dir, checkpointName, data) // a cache: failing costs replay time only
	}
	l.checkpointed(p.seq)
	return h, nil
}

// checkpointed counts a checkpoint record written and synced alone.
func (l *Ledger) checkpointed(seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastCheckpoint = seq
	l.stats.Records++
	l.stats.Batches++
	l.stats.Syncs++
	l.stats.AnchorWrites++
	l.stats.AnchorSyncs++
}

// loadCheckpoint returns the checkpoint of dir, nil when there is none. A
// checkpoint that does not match the journal f is an error naming it: its
// checkpoint record must be where it says, byte for byte, and carry the
// digest of its state.
func loadCheckpoint(dir, audit string, f *os.File, kr *keyRule) (*checkpoint, *cpState, error) {
	path := filepath.Join(dir, checkpointName)
	data, err := readState("checkpoint", path, maxCheckpoint)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	fail := func(format string, a ...any) (*checkpoint, *cpState, error) {
		return nil, nil, fmt.Errorf("%w: %s: %s; it is only a cache of the audit log: remove it to rebuild the state from the log",
			ErrCheckpoint, path, fmt.Sprintf(format, a...))
	}
	if errors.Is(err, ErrUnsafe) {
		return nil, nil, err
	}
	if err != nil {
		return fail("%v", err)
	}
	var cp checkpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		return fail("not valid JSON: %v", err)
	}
	switch {
	case cp.Version != checkpointVersion:
		return fail("version %d, not %d: it is not bound to the audit log", cp.Version, checkpointVersion)
	case cp.Audit != audit:
		return fail("it belongs to audit log %s, not %s", cp.Audit, audit)
	case cp.Records < 1 || cp.LastStart < 0 || cp.Offset <= cp.LastStart || cp.Offset-cp.LastStart > maxCheckpoint:
		return fail("its position in the audit log is not valid")
	}
	if fi, err := f.Stat(); err == nil && fi.Size() < cp.Offset {
		return nil, nil, fmt.Errorf("%w: %w: %s covers %d records (%d bytes) but audit log %s has only %d bytes: the audit log was truncated",
			ErrCheckpoint, ErrTruncated, path, cp.Records, cp.Offset, audit, fi.Size())
	}
	line := make([]byte, cp.Offset-cp.LastStart)
	if _, err := f.ReadAt(line, cp.LastStart); err != nil && !errors.Is(err, io.EOF) {
		return fail("read its record in the audit log: %v", err)
	}
	if line[len(line)-1] != '\n' {
		return fail("no record ends at byte %d of the audit log", cp.Offset)
	}
	if cp.LastStart > 0 {
		// The covered part must end a line before the record starts.
		var b [1]byte
		if _, err := f.ReadAt(b[:], cp.LastStart-1); err != nil || b[0] != '\n' {
			return fail("no record starts at byte %d of the audit log", cp.LastStart)
		}
	}
	body := line[:len(line)-1]
	if seq, _, ok := chainHeader(body); !ok || seq != uint64(cp.Records) || lineHash(body) != cp.Head {
		return fail("record %d of the audit log is not the one it names", cp.Records)
	}
	var rec parsed
	if err := json.Unmarshal(body, &rec); err != nil || (rec.Type != typeCheckpoint && rec.Type != typeSegment) {
		return fail("record %d of the audit log is not a checkpoint record", cp.Records)
	}
	// The records before it are not read: under a state key, its MAC
	// vouches for them (it covers its prev) and for the state.
	if why := kr.clone().check(uint64(cp.Records), body[:len(body)-hashSuffixLen]); why != "" {
		return nil, nil, &VerifyError{Line: cp.Records, Reason: why}
	}
	cp.line = body
	sum := sha256.Sum256(cp.State)
	if hex.EncodeToString(sum[:]) != rec.StateSHA {
		return fail("its state is not the one checkpoint record %d of the audit log vouches for: it was edited", cp.Records)
	}
	var st cpState
	if err := json.Unmarshal(cp.State, &st); err != nil {
		return fail("state not valid: %v", err)
	}
	return &cp, &st, nil
}

// lineHash is the hash field of a well-formed line, or "" when its own hash
// does not hold.
func lineHash(line []byte) string {
	n := len(line)
	if n < hashSuffixLen+2 {
		return ""
	}
	body := line[:n-hashSuffixLen]
	want := string(line[n-64-2 : n-2])
	sum := sha256.Sum256(body)
	if hex.EncodeToString(sum[:]) != want {
		return ""
	}
	return want
}

// journalEnd is where the good records of a journal end.
type journalEnd struct {
	size      int64 // bytes of complete, verified records
	lastStart int64 // offset of the last record's line; -1 when there is none
}

// replayed is what replayFile rebuilt.
type replayed struct {
	st  *state
	res VerifyResult // records and head of the good part
	end journalEnd
	cp  VerifyResult // where the checkpoint started (Records 0: none)
	// prevAt is the prev of record at+1 (the hash of record at) when that
	// record was replayed.
	prevAt string
}

// replayFile rebuilds the state from f, starting at the checkpoint when there
// is one; a checkpoint that disagrees with f is an error. at names a record
// whose hash the caller wants to check (the anchor's). A torn last line comes
// back as a *VerifyError with Torn set.
func replayFile(dir, audit string, f *os.File, at uint64, kr *keyRule) (*replayed, error) {
	rp := &replayed{st: newState(), res: VerifyResult{Head: genesis}, end: journalEnd{lastStart: -1}}
	cp, cst, err := loadCheckpoint(dir, audit, f, kr)
	if err != nil {
		return rp, err
	}
	if cp != nil && (at == ^uint64(0) || uint64(cp.Records) > at) {
		// The checkpoint's record is past the anchor (or there is none):
		// nothing but the record itself vouches for its state, and anyone
		// who can append to the journal can write one. Replay from the
		// file's start instead, which re-derives the record.
		cp, cst = nil, nil
	}
	rpl := &replayer{st: rp.st, whole: true}
	if cp != nil {
		// The key rule as of the checkpoint record (checked by loadCheckpoint).
		_ = kr.check(uint64(cp.Records), cp.line[:len(cp.line)-hashSuffixLen])
		first, err := fileStart(f)
		if err != nil {
			return rp, err
		}
		rp.st = cst.state()
		rpl.st = rp.st
		rp.res = VerifyResult{Records: cp.Records, Head: cp.Head, First: first}
		rp.cp = rp.res
		rp.end = journalEnd{size: cp.Offset, lastStart: cp.LastStart}
	} else if err := rederiveFirstSegment(audit, f, at); err != nil {
		return rp, err
	}
	if _, err := f.Seek(rp.end.size, io.SeekStart); err != nil {
		return rp, fmt.Errorf("read %s: %w", audit, err)
	}
	apply := func(p *parsed, first bool) string {
		if p.Seq == at+1 {
			rp.prevAt = p.Prev
		}
		return rpl.apply(p, first)
	}
	res, good, last, err := scanFrom(f, rp.res, kr, apply)
	if last >= 0 {
		rp.end.lastStart = rp.end.size + last
	}
	rp.end.size += good
	rp.res = res
	return rp, err
}

// rederiveFirstSegment checks the segment record that starts a rotated
// journal's file when the anchor does not cover it (a crash between the
// rotation's rename and its anchor write leaves the anchor at the file
// before; so does a segment record someone wrote): its state must be the
// one the file before it, kept under its archived name, ends with.
func rederiveFirstSegment(audit string, f *os.File, at uint64) error {
	var line []byte
	if err := eachLine(ioSection(f), func(_ uint64, l []byte) bool {
		line = append(line, l...)
		return false
	}); err != nil {
		return err
	}
	seq, _, ok := chainHeader(line)
	if !ok || seq <= 1 || (at != ^uint64(0) && at+1 != seq) {
		// No segment, one the anchor covers, or an anchor in an earlier
		// segment (checkAnchor says so).
		return nil
	}
	var p parsed
	if err := json.Unmarshal(line, &p); err != nil || p.Type != typeSegment {
		return nil // scanFrom reports it
	}
	if at == ^uint64(0) {
		return nil // no anchor: Open refuses unless told to accept that
	}
	fail := func(format string, a ...any) error {
		return &VerifyError{Line: 1, Reason: fmt.Sprintf("segment record %d is past the anchor (seq %d), so its state must be re-derived from the file before it, ", seq, at) + fmt.Sprintf(format, a...)}
	}
	name := p.PrevSegment
	if name == "" || filepath.Base(name) != name {
		return fail("but it names no archived file in this directory")
	}
	path := filepath.Join(filepath.Dir(audit), name)
	prev, err := openState("audit log", path, os.O_RDONLY)
	if err != nil {
		return fail("but %s cannot be read: %v", path, err)
	}
	defer prev.Close()
	res, st, err := verifyState(ioSection(prev), nil, nil)
	if err != nil {
		return fail("but %s does not verify: %v", path, err)
	}
	switch {
	case uint64(res.Records)+1 != seq || res.Head != p.Prev:
		return fail("but %s does not end just before it", path)
	case fullDigest(st) != p.StateSHA:
		return fail("and %s does not give that state: the segment record was not written by planlock from this journal", path)
	}
	return nil
}

// checkAnchor compares a replayed journal with its anchor.
func (rp *replayed) checkAnchor(f *os.File, want Head) error {
	return checkHead(want, rp.res, func(seq uint64) (string, error) {
		switch {
		case seq > uint64(rp.cp.Records) && rp.prevAt != "":
			return rp.prevAt, nil
		case seq == uint64(rp.cp.Records):
			return rp.cp.Head, nil
		}
		// Before the checkpoint, or record seq+1 was not replayed (the
		// file starts after it: the anchor names an earlier segment's
		// record): read it, which tells the two apart.
		return hashAt(io.NewSectionReader(f, 0, rp.end.size), seq)
	})
}

// fileStart is the seq of a journal file's first record (1 for an empty
// file): more than 1 in a file a rotation started.
func fileStart(f io.ReaderAt) (uint64, error) {
	first := uint64(1)
	err := eachLine(ioSection(f), func(_ uint64, line []byte) bool {
		if seq, _, ok := chainHeader(line); ok {
			first = seq
		}
		return false
	})
	return first, err
}

// ioSection reads f from its start, whatever its offset.
func ioSection(f io.ReaderAt) io.Reader { return io.NewSectionReader(f, 0, 1<<62) }
