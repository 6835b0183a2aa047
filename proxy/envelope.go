package proxy

import (
	"errors"
	"strings"
)

// A JSON-RPC message's envelope read without encoding/json: one pass that
// validates the whole text as JSON and slices out the top-level members the
// relay routes by. On the stdio fast lane and the upstream transport this
// replaced a reflective decode that cost more than the gate, the count and
// the audit record of the call together.
//
// It is deliberately narrower than encoding/json: a key written with an
// escape, a key that differs from a routed one only in case (encoding/json
// matches field names case-insensitively), or a routed key given twice
// makes ok false, and the caller decodes the message with encoding/json as
// before. So whenever ok is true, encoding/json reads the same values
// (FuzzEnvelope checks it).

// envelope holds the raw JSON of a message's routed members (nil when
// absent), as slices of the scanned text.
type envelope struct {
	jsonrpc, id, method, params, result, err []byte
}

// maxScanDepth is encoding/json's nesting limit; deeper text is left to it.
const maxScanDepth = 10000

var errScan = errors.New("not plain JSON")

var envelopeNames = []string{"jsonrpc", "id", "method", "params", "result", "error"}

// scanEnvelope reads b, which must be exactly one JSON object (surrounding
// whitespace allowed). ok is false when b is not, or is not plain in the
// sense above.
func scanEnvelope(b []byte) (env envelope, ok bool) {
	var vals [6][]byte
	if !scanMembers(b, envelopeNames, vals[:]) {
		return env, false
	}
	return envelope{jsonrpc: vals[0], id: vals[1], method: vals[2], params: vals[3], result: vals[4], err: vals[5]}, true
}

// scanMembers reads b, which must be exactly one JSON object, and sets
// vals[i] to the raw value of its member names[i] (nil when absent). It is
// false when b is not one object, or names a member with an escape in its
// key, twice, or in other letters' case.
func scanMembers(b []byte, names []string, vals [][]byte) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	end, err := eachMember(b, i, 1, func(key []byte, esc bool, val []byte) bool {
		return !esc && setMember(key, val, names, vals)
	})
	return err == nil && skipSpace(b, end) == len(b)
}

// setMember records the value of a member named key; false when key names
// one of names a second time, or matches one only as encoding/json matches
// names (ignoring case, folding some non-ASCII letters to ASCII ones).
func setMember(key, val []byte, names []string, vals [][]byte) bool {
	for i, n := range names {
		if string(key) == n {
			if vals[i] != nil {
				return false
			}
			vals[i] = val
			return true
		}
	}
	for _, c := range key {
		if c >= 0x80 {
			return false // a non-ASCII letter may fold to ASCII (K, ſ): leave it to encoding/json
		}
	}
	for _, n := range names {
		if len(key) == len(n) && strings.EqualFold(string(key), n) {
			return false
		}
	}
	return true
}

// plainString returns the contents of a JSON string without escapes; ok is
// false for anything else.
func plainString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	for _, c := range v[1 : len(v)-1] {
		if c == '\\' {
			return "", false
		}
	}
	return string(v[1 : len(v)-1]), true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipValue returns the end of the JSON value starting at b[i], checking
// its syntax as encoding/json does.
func skipValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return 0, errScan
	}
	switch c := b[i]; {
	case c == '"':
		end, _, err := skipString(b, i)
		return end, err
	case c == '{':
		return skipObject(b, i, depth+1)
	case c == '[':
		return skipArray(b, i, depth+1)
	case c == 't':
		return skipLiteral(b, i, "true")
	case c == 'f':
		return skipLiteral(b, i, "false")
	case c == 'n':
		return skipLiteral(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(b, i)
	}
	return 0, errScan
}

func skipLiteral(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, errScan
	}
	return i + len(lit), nil
}

// skipString returns the end of the string starting at b[i] (past its
// closing quote) and whether it holds an escape.
func skipString(b []byte, i int) (end int, esc bool, err error) {
	i++
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, esc, nil
		case c == '\\':
			esc = true
			if i+1 >= len(b) {
				return 0, esc, errScan
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return 0, esc, errScan
				}
				i += 6
			default:
				return 0, esc, errScan
			}
		case c < 0x20:
			return 0, esc, errScan
		default:
			i++
		}
	}
	return 0, esc, errScan
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func skipNumber(b []byte, i int) (int, error) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return 0, errScan
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return 0, errScan
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return 0, errScan
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	return i, nil
}

func skipObject(b []byte, i, depth int) (int, error) {
	return eachMember(b, i, depth, nil)
}

// eachMember checks the syntax of the object starting at b[i] (nested at
// depth) and returns its end; f, when set, sees each member's key (without
// its quotes; esc when it holds an escape) and raw value, and stops the
// walk, as malformed, by returning false.
func eachMember(b []byte, i, depth int, f func(key []byte, esc bool, val []byte) bool) (int, error) {
	if depth > maxScanDepth {
		return 0, errScan
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, errScan
		}
		ks := i
		ke, esc, err := skipString(b, i)
		if err != nil {
			return 0, err
		}
		i = skipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return 0, errScan
		}
		vs := skipSpace(b, i+1)
		ve, err := skipValue(b, vs, depth)
		if err != nil {
			return 0, err
		}
		if f != nil && !f(b[ks+1:ke-1], esc, b[vs:ve]) {
			return 0, errScan
		}
		next, end, err := afterElem(b, ve, '}')
		if err != nil || end {
			return next, err
		}
		i = next
	}
}

func skipArray(b []byte, i, depth int) (int, error) {
	if depth > maxScanDepth {
		return 0, errScan
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		ve, err := skipValue(b, i, depth)
		if err != nil {
			return 0, err
		}
		next, end, err := afterElem(b, ve, ']')
		if err != nil || end {
			return next, err
		}
		i = next
	}
}

// afterElem reads what follows a member or element that ends at b[i]: a
// comma (next is where the following one starts) or closer (end; next is
// past it). Anything else is malformed.
func afterElem(b []byte, i int, closer byte) (next int, end bool, err error) {
	i = skipSpace(b, i)
	if i >= len(b) {
		return 0, false, errScan
	}
	switch b[i] {
	case ',':
		return skipSpace(b, i+1), false, nil
	case closer:
		return i + 1, true, nil
	}
	return 0, false, errScan
}
