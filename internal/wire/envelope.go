package wire

import (
	"strings"

	"github.com/planlock/planlock/internal/jsonscan"
)

// A JSON-RPC message's Envelope read without encoding/json: one pass that
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

// Envelope holds the raw JSON of a message's routed members (nil when
// absent), as slices of the scanned text.
type Envelope struct {
	JSONRPC, ID, Method, Params, Result, Err []byte
}

var envelopeNames = []string{"jsonrpc", "id", "method", "params", "result", "error"}

// ScanEnvelope reads b, which must be exactly one JSON object (surrounding
// whitespace allowed). ok is false when b is not, or is not plain in the
// sense above.
func ScanEnvelope(b []byte) (env Envelope, ok bool) {
	var vals [6][]byte
	if !ScanMembers(b, envelopeNames, vals[:]) {
		return env, false
	}
	return Envelope{JSONRPC: vals[0], ID: vals[1], Method: vals[2], Params: vals[3], Result: vals[4], Err: vals[5]}, true
}

// ScanMembers reads b, which must be exactly one JSON object, and sets
// vals[i] to the raw value of its member names[i] (nil when absent). It is
// false when b is not one object, or names a member with an escape in its
// key, twice, or in other letters' case.
func ScanMembers(b []byte, names []string, vals [][]byte) bool {
	i := jsonscan.Space(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	end, err := jsonscan.EachMember(b, i, 1, func(key []byte, esc bool, val []byte) bool {
		return !esc && setMember(key, val, names, vals)
	})
	return err == nil && jsonscan.Space(b, end) == len(b)
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

// PlainString returns the contents of a JSON string without escapes; ok is
// false for anything else.
func PlainString(v []byte) (string, bool) {
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
