package ledger

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/planlock/planlock/internal/datasync"
)

// The anchor (<dir>/head) keeps the journal's head outside the journal, so
// that removing its last records is seen: Open refuses a journal shorter than
// its anchor, or whose record at the anchor's seq has another hash.
//
// It is written and synced within FlushInterval of a group commit whose
// fdatasync made records durable (the flush timer's sync), at each
// checkpoint and at Close. Because it is written only after the journal's
// fdatasync returned, it never names a record that is not durable: after any
// crash the journal is at least as long as its anchor; at worst the anchor
// lags by the records of the last 100 ms. A reader beside a running ledger
// sees the same lag.
//
// The file holds two 512-byte slots, each one text line with its own
// checksum. Writes go to one slot until it is synced, then to the other, so a
// write torn by a crash leaves the other slot intact; the valid slot with the
// higher seq is the anchor.
const (
	anchorName = "head"
	anchorSlot = 512
)

// Head is a point of the journal: a record's sequence number and hash.
type Head struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"` // 64 zeros for seq 0 (an empty journal)
}

// String is the form printed by planlock audit head and logged by the proxy,
// and read back by ParseHead.
func (h Head) String() string { return "seq=" + strconv.FormatUint(h.Seq, 10) + " hash=" + h.Hash }

func headSum(h Head) string {
	sum := sha256.Sum256([]byte(h.String()))
	return hex.EncodeToString(sum[:8])
}

func encodeSlot(h Head) []byte {
	b := make([]byte, anchorSlot)
	n := copy(b, "planlock-head "+h.String()+" sum="+headSum(h))
	for i := n; i < anchorSlot-1; i++ {
		b[i] = ' '
	}
	b[anchorSlot-1] = '\n'
	return b
}

// parseHeadLine reads "seq=N hash=H" anywhere in a line; a "sum=" field, when
// present, must match (a slot of the anchor file). ok is false when the line
// has no head or a wrong sum.
func parseHeadLine(line string) (Head, bool) {
	var (
		h                 Head
		haveSeq, haveHash bool
		sum               string
	)
	for _, f := range strings.Fields(line) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "seq":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return Head{}, false
			}
			h.Seq, haveSeq = n, true
		case "hash":
			if !isHex64(v) {
				return Head{}, false
			}
			h.Hash, haveHash = v, true
		case "sum":
			sum = v
		}
	}
	if !haveSeq || !haveHash || (sum != "" && sum != headSum(h)) {
		return Head{}, false
	}
	return h, true
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// maxHeadFile bounds what ParseHead reads.
const maxHeadFile = 1 << 20

// ParseHead reads a head from an external copy: a copy of the anchor file,
// the output of planlock audit head, or a log line of the proxy ("... seq=N
// hash=H"). With several, the highest seq counts.
func ParseHead(r io.Reader) (Head, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxHeadFile+1))
	if err != nil {
		return Head{}, err
	}
	if len(data) > maxHeadFile {
		return Head{}, fmt.Errorf("larger than %d bytes: not a head", maxHeadFile)
	}
	var (
		best  Head
		found bool
	)
	for _, line := range strings.Split(string(data), "\n") {
		if h, ok := parseHeadLine(line); ok && (!found || h.Seq > best.Seq) {
			best, found = h, true
		}
	}
	if !found {
		return Head{}, errors.New(`no head in it (a line with "seq=N hash=<64 hex>", as planlock audit head prints)`)
	}
	return best, nil
}

// anchor is the open anchor file of a ledger; only the sync lane's runner
// (or a checkpoint or rotation that took the lane) uses it.
type anchor struct {
	path  string
	f     *os.File
	slot  int    // the slot the next write goes to
	dirty bool   // that slot was written and not synced yet
	at    uint64 // seq of the last head written (0: none yet)
	fs    tracer // set by Open
}

// readAnchor reads the anchor of dir. ok is false when there is none; a file
// without a valid slot is an error.
func readAnchor(dir string) (h Head, slot int, ok bool, err error) {
	path := filepath.Join(dir, anchorName)
	data, err := readState("anchor", path, 2*anchorSlot)
	if errors.Is(err, os.ErrNotExist) {
		return Head{}, 0, false, nil
	}
	if err != nil {
		return Head{}, 0, false, fmt.Errorf("anchor: %w", err)
	}
	var valid [2]bool
	var heads [2]Head
	for i := range 2 {
		if len(data) >= (i+1)*anchorSlot {
			line := string(data[i*anchorSlot : (i+1)*anchorSlot])
			if strings.HasPrefix(line, "planlock-head ") {
				heads[i], valid[i] = parseHeadLine(line)
				valid[i] = valid[i] && strings.Contains(line, " sum=")
			}
		}
	}
	switch {
	case valid[0] && (!valid[1] || heads[0].Seq >= heads[1].Seq):
		return heads[0], 1, true, nil // write over the other slot first
	case valid[1]:
		return heads[1], 0, true, nil
	}
	return Head{}, 0, false, fmt.Errorf("%w: anchor %s holds no valid head; it was damaged or replaced. Check the audit log against a head kept elsewhere (planlock audit verify --head), then remove %s and start once with --accept-missing-anchor; refusing to start",
		ErrAnchor, path, path)
}

// createAnchor writes a new anchor holding h in both slots.
func createAnchor(dir string, h Head) error { return tracer(nil).createAnchor(dir, h) }

func (t tracer) createAnchor(dir string, h Head) error {
	return t.writeStateAtomic("anchor", dir, anchorName, append(encodeSlot(h), encodeSlot(h)...))
}

// openAnchor opens the anchor of dir, whose next write goes to slot and
// whose newest head has seq at.
func openAnchor(dir string, slot int, at uint64) (*anchor, error) {
	path := filepath.Join(dir, anchorName)
	f, err := openState("anchor", path, os.O_RDWR)
	if err != nil {
		return nil, fmt.Errorf("open anchor: %w", err)
	}
	return &anchor{path: path, f: f, slot: slot, at: at}, nil
}

// write puts h in the current slot, without syncing it. A head older than
// the last one written is ignored: the anchor only moves forward.
func (a *anchor) write(h Head) error {
	if h.Seq < a.at {
		return nil
	}
	slot := encodeSlot(h)
	if _, err := a.f.WriteAt(slot, int64(a.slot*anchorSlot)); err != nil {
		return fmt.Errorf("%w: write anchor %s: %w", ErrFailed, a.path, err)
	}
	a.fs.wrote(a.path, int64(a.slot*anchorSlot), slot)
	a.dirty, a.at = true, h.Seq
	return nil
}

// sync makes the last write durable; the next write goes to the other slot.
func (a *anchor) sync() error {
	if !a.dirty {
		return nil
	}
	a.fs.syncing(a.path)
	if err := datasync.Sync(a.f); err != nil {
		return fmt.Errorf("%w: sync anchor %s: %w", ErrFailed, a.path, err)
	}
	a.dirty, a.slot = false, 1-a.slot
	return nil
}

func (a *anchor) close() error { return a.f.Close() }

// AnchorError says how a journal disagrees with its anchor.
type AnchorError struct {
	Anchor  Head   // what the anchor says
	Records int    // records in the journal
	Hash    string // the journal's hash at Anchor.Seq; empty when it has fewer records
}

func (e *AnchorError) Error() string {
	if e.Hash == "" {
		return fmt.Sprintf("truncated: the audit log has %d records but its anchor says %d (%s): records %d to %d were removed",
			e.Records, e.Anchor.Seq, e.Anchor, e.Records+1, e.Anchor.Seq)
	}
	return fmt.Sprintf("rewritten: record %d has hash %s but its anchor says %s", e.Anchor.Seq, e.Hash, e.Anchor.Hash)
}

// Is makes errors.Is(err, ErrAnchor) true, and ErrTruncated for a journal
// shorter than its anchor.
func (e *AnchorError) Is(target error) bool {
	return target == ErrAnchor || (target == ErrTruncated && e.Hash == "")
}

// checkHead compares a journal with a head: res is the journal's Verify (or
// replay) result, hashAt finds the hash of an earlier record.
func checkHead(want Head, res VerifyResult, hashAt func(seq uint64) (string, error)) error {
	if want.Seq > uint64(res.Records) {
		return &AnchorError{Anchor: want, Records: res.Records}
	}
	got := res.Head
	if want.Seq == 0 {
		got = genesis
	} else if want.Seq < uint64(res.Records) {
		var err error
		if got, err = hashAt(want.Seq); err != nil {
			return err
		}
	}
	if got != want.Hash {
		return &AnchorError{Anchor: want, Records: res.Records, Hash: got}
	}
	return nil
}

// VerifyHead checks a journal that Verify found good (res) against a head
// kept elsewhere: it must have the record want.Seq, with hash want.Hash. A
// shorter journal is an *AnchorError matching ErrTruncated.
func VerifyHead(r io.ReadSeeker, res VerifyResult, want Head) error {
	return checkHead(want, res, func(seq uint64) (string, error) {
		if _, err := r.Seek(0, io.SeekStart); err != nil {
			return "", err
		}
		return hashAt(r, seq)
	})
}

// FindHash returns the seq of the record whose hash is hash, if the journal
// has one.
func FindHash(r io.Reader, hash string) (uint64, bool, error) {
	var found uint64
	err := eachLine(r, func(_ uint64, line []byte) bool {
		if lineHash(line) == hash {
			found, _, _ = chainHeader(line)
			return false
		}
		return true
	})
	return found, found > 0, err
}

// errEarlierSegment: a head names a record rotated out of the file read.
var errEarlierSegment = errors.New("earlier segment")

// hashAt returns the hash of record seq, read from the journal's start. In a
// file a rotation started, the record just before its first is known too:
// the first record's prev.
func hashAt(r io.Reader, seq uint64) (string, error) {
	var h string
	var before bool
	err := eachLine(r, func(n uint64, line []byte) bool {
		s, prev, ok := chainHeader(line)
		if !ok {
			return false
		}
		if n == 1 && s == seq+1 && lineHash(line) != "" {
			h = prev
			return false
		}
		if n == 1 && s > seq+1 {
			before = true
			return false
		}
		if s < seq {
			return true
		}
		if s == seq {
			h = lineHash(line)
		}
		return false
	})
	if err == nil && before {
		err = fmt.Errorf("%w: %w: record %d is in an earlier segment of the journal, not in this file", ErrAnchor, errEarlierSegment, seq)
	}
	if err == nil && h == "" {
		err = fmt.Errorf("%w: record %d is missing or damaged", ErrCorrupt, seq)
	}
	return h, err
}

// eachLine calls fn with each complete line (without its newline), numbered
// from 1, until fn returns false.
func eachLine(r io.Reader, fn func(n uint64, line []byte) bool) error {
	br := bufio.NewReaderSize(r, 1<<16)
	for n := uint64(1); ; n++ {
		line, err := br.ReadSlice('\n')
		var long []byte
		for errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, line...)
			line, err = br.ReadSlice('\n')
		}
		if long != nil {
			line = append(long, line...)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read audit log: %w", err)
		}
		if !fn(n, bytes.TrimSuffix(line, []byte("\n"))) {
			return nil
		}
	}
}

// ReadHead returns the anchored head of a state directory (Options.Dir, or
// the default): the last record the proxy made durable, for shipping
// elsewhere. It never writes.
func ReadHead(o Options) (Head, error) {
	dir, _, err := resolvePaths(o)
	if err != nil {
		return Head{}, err
	}
	h, _, ok, err := readAnchor(dir)
	if err != nil {
		return Head{}, err
	}
	if !ok {
		return Head{}, fmt.Errorf("no anchor in %s: %s does not exist (the proxy writes it when it opens the state directory)", dir, filepath.Join(dir, anchorName))
	}
	return h, nil
}
