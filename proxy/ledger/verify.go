package ledger

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Verify reads a journal and checks every record's hash, its sequence number
// and its link to the record before. It returns the number of records and the
// head hash, or a *VerifyError naming the first bad line (1-based). A last
// line without its newline is reported with Torn set. Other errors are I/O
// errors of r.
//
// Verify also replays the records and re-derives those that vouch for the
// state (docs/audit-log.md): a checkpoint record whose state is not the one
// the records before it give, or a segment record anywhere but at the
// file's start, is a *VerifyError too.
func Verify(r io.Reader) (VerifyResult, error) {
	res, _, err := verifyState(r, nil, nil)
	return res, err
}

// VerifyWith is Verify that also checks every record's state MAC under key
// (see StateKey; nil: as Verify): a record that lacks one after the first
// that has one, or whose MAC does not verify, is a *VerifyError, and so
// is a journal with records none of which has one.
func VerifyWith(r io.Reader, key *StateKey) (VerifyResult, error) {
	kr := ruleFor(key)
	res, _, err := verifyState(r, nil, kr)
	if err == nil {
		err = kr.finishVerify(res)
	}
	return res, err
}

// verifyState is Verify, continuing from prior (the state the file before
// ended with, nil when unknown) and returning the state replayed: a file
// that starts with a segment record must then start from exactly prior.
func verifyState(r io.Reader, prior *state, kr *keyRule) (VerifyResult, *state, error) {
	rp := &replayer{st: newState(), whole: true}
	if prior != nil {
		rp.st = prior
	}
	res, _, _, err := scanFrom(r, VerifyResult{Head: genesis}, kr, func(p *parsed, first bool) string {
		if first && p.Type == typeSegment && prior != nil {
			if why := prior.rederive(p, true); why != "" {
				return why
			}
		}
		return rp.apply(p, first)
	})
	return res, rp.st, err
}

// scan walks the journal, calling apply for each good record. It returns the
// byte length of the good prefix, which is where a torn line starts.
func scan(r io.Reader, apply func(p *parsed, first bool) string) (VerifyResult, int64, int64, error) {
	return scanFrom(r, VerifyResult{Head: genesis}, nil, apply)
}

// scanFrom continues a scan after `from` (records already read and their
// head); r starts at the next line. Line numbers count from the file's start.
// It also returns the offset in r of the last good line (-1 if none). kr
// is the state key's rule (nil: no MAC is checked).
func scanFrom(r io.Reader, from VerifyResult, kr *keyRule, apply func(p *parsed, first bool) string) (res VerifyResult, good, last int64, err error) {
	br := bufio.NewReaderSize(r, 1<<16)
	res, last = from, -1
	var (
		acc  []byte
		long bool
	)
	// base is the seq before the file's first record: line numbers count
	// from the file's start.
	base := 0
	if from.First > 1 {
		base = int(from.First) - 1
	}
	for seq := from.Records + 1; ; seq++ {
		lineNo := seq - base
		chunk, err := br.ReadSlice('\n')
		for errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: gather it.
			acc = append(acc, chunk...)
			long = true
			chunk, err = br.ReadSlice('\n')
		}
		line := chunk
		if long {
			acc = append(acc, chunk...)
			line = acc
		}
		if errors.Is(err, io.EOF) {
			if len(line) > 0 {
				return res, good, last, &VerifyError{Line: lineNo, Torn: true,
					Reason: "torn: the last line is incomplete (no newline), a write cut short by a crash; opening the state directory truncates it"}
			}
			return res, good, last, nil
		}
		if err != nil {
			return res, good, last, fmt.Errorf("read audit log: %w", err)
		}
		if seq == 1 && res.Records == 0 {
			// The file's first line: a later segment of a rotated journal
			// starts where the one before it ended.
			if start, prev, reason := segmentStart(line[:len(line)-1]); reason != "" {
				return res, good, last, &VerifyError{Line: 1, Reason: reason}
			} else if start > 1 {
				seq, base, res.Head = int(start), int(start)-1, prev
				res.Records = seq - 1
			}
			res.First = uint64(seq)
		}
		p, hash, reason := checkLine(line[:len(line)-1], uint64(seq), res.Head, apply != nil, kr)
		if reason != "" {
			return res, good, last, &VerifyError{Line: lineNo, Reason: reason}
		}
		if apply != nil {
			if p.Type == typeSegment && lineNo != 1 {
				return res, good, last, &VerifyError{Line: lineNo, Reason: "a segment record that does not start its file"}
			}
			if why := apply(p, lineNo == 1); why != "" {
				return res, good, last, &VerifyError{Line: lineNo, Reason: why}
			}
		}
		res.Records++
		res.Head = hash
		last = good
		good += int64(len(line))
		acc, long = acc[:0], false
	}
}

// segmentStart reads the chain header of a file's first line: a seq above 1
// is allowed only for a segment record, which continues the chain of the
// file before it (its prev is that file's last hash).
func segmentStart(line []byte) (seq uint64, prev string, reason string) {
	seq, prev, ok := chainHeader(line)
	if !ok || seq <= 1 {
		return 1, "", "" // checkLine says what is wrong, if anything
	}
	var r struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(line, &r); err != nil || r.Type != typeSegment {
		return 0, "", fmt.Sprintf("seq %d where 1 was expected: records were removed from the start, or this is not the first file of the journal and does not start with a segment record", seq)
	}
	return seq, prev, ""
}
