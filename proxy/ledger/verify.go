package ledger

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// Verify reads a journal and checks every record's hash, its sequence number
// and its link to the record before. It returns the number of records and the
// head hash, or a *VerifyError naming the first bad line (1-based). A last
// line without its newline is reported with Torn set. Other errors are I/O
// errors of r.
func Verify(r io.Reader) (VerifyResult, error) {
	res, _, _, err := scan(r, nil)
	return res, err
}

// scan walks the journal, calling apply for each good record. It returns the
// byte length of the good prefix, which is where a torn line starts.
func scan(r io.Reader, apply func(*parsed)) (VerifyResult, int64, int64, error) {
	return scanFrom(r, VerifyResult{Head: genesis}, apply)
}

// scanFrom continues a scan after `from` (records already read and their
// head); r starts at the next line. Line numbers count from the file's start.
// It also returns the offset in r of the last good line (-1 if none).
func scanFrom(r io.Reader, from VerifyResult, apply func(*parsed)) (res VerifyResult, good, last int64, err error) {
	br := bufio.NewReaderSize(r, 1<<16)
	res, last = from, -1
	var (
		acc  []byte
		long bool
	)
	for lineNo := from.Records + 1; ; lineNo++ {
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
		p, hash, reason := checkLine(line[:len(line)-1], uint64(lineNo), res.Head, apply != nil)
		if reason != "" {
			return res, good, last, &VerifyError{Line: lineNo, Reason: reason}
		}
		if apply != nil {
			apply(p)
		}
		res.Records++
		res.Head = hash
		last = good
		good += int64(len(line))
		acc, long = acc[:0], false
	}
}
