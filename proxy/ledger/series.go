package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// SegmentResult is one file of a verified series.
type SegmentResult struct {
	Path    string `json:"path"`
	First   uint64 `json:"first"`   // seq of its first record (0: empty)
	Records int    `json:"records"` // seq of its last record
	Head    string `json:"head"`    // hash of its last record
}

// SeriesError names the file of a series where the chain breaks.
type SeriesError struct {
	Path  string
	Index int // 0-based position of the file in the series
	// Line is the 1-based line of the file; 0 when the break is between
	// this file and the one before it.
	Line   int
	Torn   bool
	Reason string
}

func (e *SeriesError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s: line %d: %s", e.Path, e.Line, e.Reason)
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *SeriesError) Is(target error) bool { return target == ErrCorrupt }

// VerifySeries checks journal files as one chain, in the order given: the
// archived segments of a rotated journal, oldest first, then the journal
// itself. Each file must verify, and each after the first must start with
// the segment record that continues the file before it (its seq the next,
// its prev that file's last hash): a missing, reordered, truncated or
// edited file is a *SeriesError naming it. The first file may be a later
// segment (older ones archived away): the result's First says where the
// series starts. limit, when set, wraps each file's reader (a bound on line
// length). A torn last line is an error in any file.
func VerifySeries(paths []string, limit func(r io.Reader, path string) io.Reader) ([]SegmentResult, VerifyResult, error) {
	files, err := openPaths(paths)
	if err != nil {
		return nil, VerifyResult{}, err
	}
	defer CloseFiles(files)
	return VerifyFiles(files, limit)
}

// VerifyFiles is VerifySeries over files already open (OpenSeries), each
// read from its start. A last line of the last file that is torn is read
// again a few times over 100 ms before it is reported: the file may be a
// live journal whose record is being written.
func VerifyFiles(files []*os.File, limit func(r io.Reader, path string) io.Reader) ([]SegmentResult, VerifyResult, error) {
	return walkSeriesWith(files, limit, nil, false, nil)
}

// VerifyFilesWith is VerifyFiles that also checks the state MAC of every
// record under key, as VerifyWith does, across the series as one chain.
func VerifyFilesWith(files []*os.File, limit func(r io.Reader, path string) io.Reader, key *StateKey) ([]SegmentResult, VerifyResult, error) {
	kr := ruleFor(key)
	segs, res, err := walkSeriesWith(files, limit, nil, false, kr)
	if err == nil {
		if err = kr.finishVerify(res); err != nil && len(files) > 0 {
			var ve *VerifyError
			if errors.As(err, &ve) {
				err = &SeriesError{Path: files[len(files)-1].Name(), Index: len(files) - 1, Reason: ve.Reason}
			}
		}
	}
	return segs, res, err
}

func openPaths(paths []string) ([]*os.File, error) {
	var files []*os.File
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			CloseFiles(files)
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// walkSeries is VerifyFiles, calling fn (when set) with each record. With
// allowTorn a torn last line of the last file ends the walk without error:
// a proxy may be writing it.
func walkSeries(files []*os.File, limit func(io.Reader, string) io.Reader, fn func(*parsed) error, allowTorn bool) ([]SegmentResult, VerifyResult, error) {
	return walkSeriesWith(files, limit, fn, allowTorn, nil)
}

// walkSeriesWith is walkSeries under the state key's rule kr (nil: no MAC
// checked), kept across the files: they are one chain.
func walkSeriesWith(files []*os.File, limit func(io.Reader, string) io.Reader, fn func(*parsed) error, allowTorn bool, kr *keyRule) ([]SegmentResult, VerifyResult, error) {
	if len(files) == 0 {
		return nil, VerifyResult{}, errors.New("no audit log files given")
	}
	var (
		out  []SegmentResult
		all  = VerifyResult{Head: genesis}
		prev *SegmentResult
		st   *state
	)
	for i, f := range files {
		path := f.Name()
		last := i == len(files)-1
		seg, err := walkFile(f, prev, st, limit, fn, allowTorn && last, last, kr)
		if err != nil {
			var ve *VerifyError
			if errors.As(err, &ve) {
				return out, all, &SeriesError{Path: path, Index: i, Line: ve.Line, Torn: ve.Torn, Reason: ve.Reason}
			}
			var se *SeriesError
			if errors.As(err, &se) {
				se.Index = i
				return out, all, se
			}
			return out, all, err
		}
		if prev != nil {
			if reason := linkReason(*prev, seg); reason != "" {
				return out, all, &SeriesError{Path: path, Index: i, Reason: reason}
			}
		}
		if seg.First == 0 && len(files) > 1 {
			return out, all, &SeriesError{Path: path, Index: i, Reason: "empty: a journal file a rotation made starts with its segment record"}
		}
		if i == 0 {
			all.First = seg.First
		}
		if seg.First > 0 {
			all.Records, all.Head = seg.Records, seg.Head
		}
		out = append(out, seg.SegmentResult)
		prev = &out[len(out)-1]
		st = seg.st
		if kr != nil {
			*kr = *seg.kr
		}
	}
	return out, all, nil
}

// walked is one file's result and the prev of its first record.
type walked struct {
	SegmentResult
	firstPrev string
	st        *state // the state replayed through the file's last record
	kr        *keyRule
}

func linkReason(before SegmentResult, seg walked) string {
	want := uint64(before.Records) + 1
	switch {
	case seg.First == want && seg.firstPrev != before.Head:
		return fmt.Sprintf("its first record (seq %d) does not continue %s: its prev is not that file's last hash (the file before was edited or replaced)", seg.First, before.Path)
	case seg.First > want:
		return fmt.Sprintf("starts at seq %d, but %s ends at seq %d: records %d to %d are missing (a segment was removed, or the file before was truncated)",
			seg.First, before.Path, before.Records, want, seg.First-1)
	case seg.First < want:
		return fmt.Sprintf("starts at seq %d, but %s ends at seq %d: the files are out of order or overlap", seg.First, before.Path, before.Records)
	}
	return ""
}

// walkFile verifies one file of a series; before is the file before it
// (nil for the first). fn sees a file's records only once its first record
// was found to continue before. With live (and no fn) a torn last line is
// read again before it is reported.
func walkFile(f *os.File, before *SegmentResult, prior *state, limit func(io.Reader, string) io.Reader, fn func(*parsed) error, allowTorn, live bool, kr0 *keyRule) (walked, error) {
	path := f.Name()
	w := walked{SegmentResult: SegmentResult{Path: path}}
	var fnErr error
	// A file after the first starts with its segment record, which
	// replaces the state: prior is only compared, never changed.
	rp := &replayer{st: newState(), whole: true}
	apply := func(p *parsed, first bool) string {
		if first && before != nil {
			if reason := linkReason(*before, walked{SegmentResult: SegmentResult{First: p.Seq}, firstPrev: p.Prev}); reason != "" && fnErr == nil {
				fnErr = &SeriesError{Path: path, Reason: reason}
			}
		}
		if fnErr != nil {
			return ""
		}
		if first && p.Type == typeSegment && prior != nil {
			// The file before was replayed here: the state the
			// segment carries must be the one it ended with.
			if why := prior.rederive(p, true); why != "" {
				return why
			}
		}
		if why := rp.apply(p, first); why != "" {
			return why
		}
		if fn != nil {
			fnErr = fn(p)
		}
		return ""
	}
	var res VerifyResult
	var err error
	kr := kr0.clone()
	if live && fn == nil {
		res, err = verifyLiveFrom(f, limit, tornWait, func() (*replayer, *keyRule) {
			rp = &replayer{st: newState(), whole: true}
			kr = kr0.clone()
			return rp, kr
		}, apply)
	} else if res, _, _, err = scanFrom(fileReader(f, limit), VerifyResult{Head: genesis}, kr, apply); allowTorn && isTorn(err) {
		err = nil
	}
	if err != nil {
		return w, err
	}
	if fnErr != nil {
		return w, fnErr
	}
	w.First, w.Records, w.Head, w.st, w.kr = res.First, res.Records, res.Head, rp.st, kr
	if res.First > 1 {
		_ = eachLine(ioSection(f), func(_ uint64, line []byte) bool {
			_, w.firstPrev, _ = chainHeader(line)
			return false
		})
	}
	return w, nil
}

// ExportSchema names the shape of ExportRecord; it changes only if a
// field's meaning does (fields may be added).
const ExportSchema = "planlock.audit.v1"

// ExportRecord is one audit record as planlock audit export writes it, one
// JSON object per line, for a log store or a SIEM: the journal's fields
// under the same names, without the inline state of segment records (its
// digest, state_sha256, stays), and with the schema name. Seq, Prev and
// Hash are the hash chain: a receiver can check it, and resume after the
// last seq it stored. Fields that do not apply are left out.
type ExportRecord struct {
	Schema      string          `json:"schema"`
	Seq         uint64          `json:"seq"`
	Time        time.Time       `json:"time"`
	Type        string          `json:"type"`
	Decision    string          `json:"decision,omitempty"`
	Plan        string          `json:"plan,omitempty"`
	PlanName    string          `json:"plan_name,omitempty"`
	Step        string          `json:"step,omitempty"`
	StepIndex   *int            `json:"step_index,omitempty"`
	Tool        string          `json:"tool,omitempty"`
	Caller      string          `json:"caller,omitempty"`
	Args        json.RawMessage `json:"args,omitempty"`
	ArgsSHA256  string          `json:"args_sha256,omitempty"`
	Reason      string          `json:"reason,omitempty"`
	Hold        string          `json:"hold,omitempty"`
	HoldState   HoldState       `json:"hold_state,omitempty"`
	Expires     *time.Time      `json:"expires,omitempty"`
	PRURL       string          `json:"pr_url,omitempty"`
	PR          int             `json:"pr,omitempty"`
	Note        string          `json:"note,omitempty"`
	SignedAt    *time.Time      `json:"signed_at,omitempty"`
	Ref         uint64          `json:"ref,omitempty"`
	OK          *bool           `json:"ok,omitempty"`
	Error       string          `json:"error,omitempty"`
	LatencyMS   *float64        `json:"latency_ms,omitempty"`
	HoldStep    bool            `json:"hold_step,omitempty"`
	Used        int             `json:"used,omitempty"`
	Max         int             `json:"max,omitempty"`
	Through     int             `json:"through,omitempty"`
	Cause       string          `json:"cause,omitempty"`
	ObservedPin string          `json:"observed_pin,omitempty"`
	SignedPath  string          `json:"signed_path,omitempty"`
	SignedTrust string          `json:"signed_trust,omitempty"`
	StateSHA256 string          `json:"state_sha256,omitempty"`
	PrevSegment string          `json:"prev_segment,omitempty"`
	Replica     string          `json:"replica,omitempty"`
	ApprovalSHA string          `json:"approval_sha256,omitempty"`
	Prev        string          `json:"prev"`
	Hash        string          `json:"hash"`
}

func exportOf(p *parsed) ExportRecord {
	r := &p.record
	return ExportRecord{Schema: ExportSchema, Seq: p.Seq, Time: r.Time, Type: r.Type, Decision: r.Decision,
		Plan: r.Plan, PlanName: r.PlanName, Step: r.Step, StepIndex: r.StepIndex, Tool: r.Tool, Caller: r.Caller, Args: r.Args,
		ArgsSHA256: r.ArgsSHA, Reason: r.Reason, Hold: r.Hold, HoldState: r.HoldState, Expires: r.Expires,
		PRURL: r.PRURL, PR: r.PR, Note: r.Note, SignedAt: r.SignedAt, Ref: r.Ref, OK: r.OK, Error: r.Error,
		LatencyMS: r.LatencyMS, HoldStep: r.HoldStep, Used: r.Used, Max: r.Max, Through: r.Through,
		Cause: r.Cause, ObservedPin: r.ObservedPin, SignedPath: r.SignedPath, SignedTrust: r.SignedTrust, StateSHA256: r.StateSHA,
		PrevSegment: r.PrevSegment, Replica: r.Replica, ApprovalSHA: r.ApprovalSHA, Prev: p.Prev, Hash: p.Hash}
}

// AppendExportLine appends e as one JSON line (HTML escaping off, so
// arguments read as sent) to dst. Other stores of the same records use it
// to give the same shape.
func AppendExportLine(dst []byte, e *ExportRecord) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return dst, fmt.Errorf("export record %d: %w", e.Seq, err)
	}
	return append(dst, buf.Bytes()...), nil
}

// ExportResult is what Export wrote.
type ExportResult struct {
	Records int    // records written
	Last    uint64 // seq of the last record written (0: none)
	Head    string // hash of the series' last record
}

// Export verifies journal files as one series (see VerifySeries) and writes
// the records with seq >= fromSeq to w as ExportRecord lines, in order. A
// receiver that stored up to seq N resumes with fromSeq N+1. Records are
// written as they are verified; on a break in the chain Export stops there
// and returns a *SeriesError, having written only records before the break.
// A torn last line of the last file (a record being written) is left out.
func Export(w io.Writer, paths []string, fromSeq uint64, limit func(io.Reader, string) io.Reader) (ExportResult, error) {
	files, err := openPaths(paths)
	if err != nil {
		return ExportResult{}, err
	}
	defer CloseFiles(files)
	return ExportFiles(w, files, fromSeq, limit)
}

// ExportFiles is Export over files already open (OpenSeries), each read
// from its start.
func ExportFiles(w io.Writer, files []*os.File, fromSeq uint64, limit func(io.Reader, string) io.Reader) (ExportResult, error) {
	var out ExportResult
	var line []byte
	_, res, err := walkSeries(files, limit, func(p *parsed) error {
		if p.Seq < fromSeq {
			return nil
		}
		e := exportOf(p)
		var err error
		if line, err = AppendExportLine(line[:0], &e); err != nil {
			return err
		}
		if _, err := w.Write(line); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		out.Records++
		out.Last = p.Seq
		return nil
	}, true)
	out.Head = res.Head
	return out, err
}

// VerifyLive is Verify of a file that a proxy may be writing: a torn last
// line is read again a few times over 100 ms before it is reported (a
// record being written is whole within microseconds; one a crash cut short
// stays torn).
func VerifyLive(f *os.File, limit func(io.Reader, string) io.Reader) (VerifyResult, error) {
	return verifyLive(f, limit, tornWait, nil)
}

// VerifyLiveWith is VerifyLive that also checks every record's state MAC
// under key, as VerifyWith does.
func VerifyLiveWith(f *os.File, limit func(io.Reader, string) io.Reader, key *StateKey) (VerifyResult, error) {
	return verifyLive(f, limit, tornWait, key)
}

// verifyLive is VerifyLive, calling wait before each new read.
func verifyLive(f *os.File, limit func(io.Reader, string) io.Reader, wait func(), key *StateKey) (VerifyResult, error) {
	var rp *replayer
	var kr *keyRule
	res, err := verifyLiveFrom(f, limit, wait, func() (*replayer, *keyRule) {
		rp, kr = &replayer{st: newState(), whole: true}, ruleFor(key)
		return rp, kr
	}, func(p *parsed, first bool) string { return rp.apply(p, first) })
	if err == nil {
		err = kr.finishVerify(res)
	}
	return res, err
}

// verifyLiveFrom is verifyLive with the replay's callback; reset starts a
// fresh replay (and key rule) before each read.
func verifyLiveFrom(f *os.File, limit func(io.Reader, string) io.Reader, wait func(), reset func() (*replayer, *keyRule), apply func(*parsed, bool) string) (VerifyResult, error) {
	_, kr := reset()
	res, _, _, err := scanFrom(fileReader(f, limit), VerifyResult{Head: genesis}, kr, apply)
	for i := 0; i < tornRereads && isTorn(err); i++ {
		wait()
		_, kr = reset()
		res, _, _, err = scanFrom(fileReader(f, limit), VerifyResult{Head: genesis}, kr, apply)
	}
	return res, err
}

// fileReader reads f from its start, through limit when set.
func fileReader(f *os.File, limit func(io.Reader, string) io.Reader) io.Reader {
	if limit != nil {
		return limit(ioSection(f), f.Name())
	}
	return ioSection(f)
}

const tornRereads = 5

func tornWait() { time.Sleep(20 * time.Millisecond) }

func isTorn(err error) bool {
	var ve *VerifyError
	return errors.As(err, &ve) && ve.Torn
}

// ExportJournal writes the records of a whole journal held in memory (a
// store that keeps the lines elsewhere, e.g. a database, read as a file
// would hold them) with seq >= fromSeq to w, as Export does for files:
// the same ExportRecord lines, each record's chain checked before it is
// written; a break stops the export there with a *VerifyError.
func ExportJournal(w io.Writer, data []byte, fromSeq uint64) (ExportResult, error) {
	out := ExportResult{Head: genesis}
	seq := uint64(0)
	var line []byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return out, &VerifyError{Line: int(seq + 1), Torn: true, Reason: "the last record has no newline"}
		}
		p, hash, reason := checkLine(data[:i], seq+1, out.Head, true, nil)
		if reason != "" {
			return out, &VerifyError{Line: int(seq + 1), Reason: reason}
		}
		seq, out.Head, data = p.Seq, hash, data[i+1:]
		if p.Seq < fromSeq {
			continue
		}
		e := exportOf(p)
		var err error
		if line, err = AppendExportLine(line[:0], &e); err != nil {
			return out, err
		}
		if _, err := w.Write(line); err != nil {
			return out, fmt.Errorf("export: %w", err)
		}
		out.Records++
		out.Last = p.Seq
	}
	return out, nil
}
