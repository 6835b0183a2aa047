package ledger

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/planlock/planlock/internal/jsonscan"
)

// appendCompact appends the JSON text src without its insignificant
// whitespace, exactly as json.Compact writes it, and refuses what
// json.Compact refuses, with its error. json.Compact's byte-by-byte scanner
// cost about half of an allow record's encoding; compactFast checks the
// text with jsonscan and copies it in runs, leaving anything jsonscan does
// not read to json.Compact.
func appendCompact(dst, src []byte) ([]byte, error) {
	if out, ok := compactFast(dst, src); ok {
		return out, nil
	}
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, src); err != nil {
		return dst, err
	}
	return buf.Bytes(), nil
}

// compactFast is appendCompact for JSON text jsonscan reads; false (dst
// unchanged) for anything else. FuzzCompactFast checks it against
// json.Compact.
func compactFast(dst, src []byte) ([]byte, bool) {
	start := jsonscan.Space(src, 0)
	end, err := jsonscan.Value(src, start, 0)
	if err != nil || jsonscan.Space(src, end) != len(src) {
		return dst, false
	}
	run := start // the bytes from run to i are copied as they are
	for i := start; i < end; {
		switch src[i] {
		case ' ', '\t', '\n', '\r':
			dst = append(dst, src[run:i]...)
			i = jsonscan.Space(src, i)
			run = i
		case '"':
			i, _, _ = jsonscan.String(src, i) // checked by Value
		default:
			i++
		}
	}
	return append(dst, src[run:end]...), true
}

// CheckArgs returns the error a record of a call with these arguments
// would be refused with (Reserve's, Machine.Reserve's), without encoding
// one: for a store that takes a call's number before it encodes the
// call's record (pgstate's leases), so that refused arguments take none.
func CheckArgs(args json.RawMessage, redact bool) error {
	if len(args) == 0 {
		return nil // recorded as {}
	}
	if redact {
		_, err := ArgsDigest(args)
		return err
	}
	start := jsonscan.Space(args, 0)
	if end, err := jsonscan.Value(args, start, 0); err == nil && jsonscan.Space(args, end) == len(args) {
		return nil
	}
	if err := json.Compact(new(bytes.Buffer), args); err != nil {
		return fmt.Errorf("%w: arguments are not JSON: %v", ErrInvalidArgument, err)
	}
	return nil
}
