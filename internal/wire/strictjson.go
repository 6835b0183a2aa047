package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/canonjson"
	"github.com/planlock/planlock/internal/jsonscan"
)

// maxArgDepth bounds the nesting of call arguments; encoding/json allows
// 10000, far beyond any tool's schema.
const maxArgDepth = 64

// DecodeArgs decodes a call's arguments: one JSON object, numbers kept exact.
//
// The gate checks the decoded value while the upstream receives the raw
// bytes, so every input that two JSON parsers may read differently is
// refused here: a repeated key (encoding/json keeps the last value, other
// parsers the first; "a" and "\u0061" are the same key), invalid UTF-8 and
// lone UTF-16 surrogate escapes (both replaced by U+FFFD here, kept or
// rejected elsewhere) and a negative zero (-0 to some parsers, 0 to others,
// and 0 in the canonical form an approval binds to). Numbers are bounded
// (hclplan.CheckNumber) before anything does arithmetic on them. Deep
// nesting is refused for its cost, trailing data after the object too;
// BOMs, NaN, Infinity and leading zeros are not JSON and encoding/json
// refuses them. What is checked is then what the upstream reads.
func DecodeArgs(raw []byte) (map[string]any, error) {
	v, err := decodeStrict(raw, true)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("got %s", JSONKind(v))
	}
	return m, nil
}

// DecodeDocument decodes the JSON document of a pin's result as strictly as
// arguments (what the pin compares is the only reading of it), except that
// any value may be the document and a negative zero is read as zero, as the
// pin compares numbers by value.
func DecodeDocument(raw []byte) (any, error) {
	return decodeStrict(raw, false)
}

func decodeStrict(raw []byte, refuseNegZero bool) (any, error) {
	if !utf8.Valid(raw) {
		return nil, errors.New("invalid UTF-8")
	}
	members, depth, err := shape(raw, refuseNegZero)
	if err != nil {
		return nil, err
	}
	if depth > maxArgDepth {
		return nil, fmt.Errorf("nested deeper than %d levels", maxArgDepth)
	}
	if v, ok := buildValue(raw); ok {
		return v, nil
	}
	// Malformed, or a key repeats: the decoder says why, as it always has.
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("trailing data")
	}
	if countKeys(v) != members {
		// Fewer keys than members: some key repeats. The token walk
		// (slower, so only now) names it.
		sd := json.NewDecoder(bytes.NewReader(raw))
		sd.UseNumber()
		if _, err := canonjson.DecodeValue(sd, maxArgDepth, false); err != nil {
			return nil, err
		}
		return nil, errors.New("a key appears twice in one object")
	}
	return v, nil
}

// shape counts the object members of a JSON text (the colons outside
// strings) and its deepest nesting, in one pass over the bytes, and refuses
// a lone surrogate escape in any string, a number out of hclplan's bounds
// and, with refuseNegZero, a negative zero. Malformed JSON is left to the
// decoder.
func shape(raw []byte, refuseNegZero bool) (members, depth int, err error) {
	cur := 0
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			if i, err = stringEnd(raw, i+1); err != nil {
				return 0, 0, err
			}
		case c == ':':
			members++
		case c == '{' || c == '[':
			cur++
			depth = max(depth, cur)
		case c == '}' || c == ']':
			cur--
		case c == '-' || (c >= '0' && c <= '9'):
			j := i + 1
			for j < len(raw) && isNumberByte(raw[j]) {
				j++
			}
			if err := checkNumber(raw[i:j], refuseNegZero); err != nil {
				return 0, 0, err
			}
			i = j - 1
		}
	}
	return members, depth, nil
}

func isNumberByte(c byte) bool {
	return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

// checkNumber refuses a number out of hclplan's bounds or, with
// refuseNegZero, a negative zero.
func checkNumber(num []byte, refuseNegZero bool) error {
	if err := hclplan.CheckNumber(num); err != nil {
		return err
	}
	if !refuseNegZero || num[0] != '-' || len(num) < 2 || num[1] != '0' {
		return nil
	}
	for _, c := range num[2:] {
		switch {
		case c == 'e' || c == 'E':
			return fmt.Errorf("number %s is a negative zero; send 0", num)
		case c >= '1' && c <= '9':
			return nil
		}
	}
	return fmt.Errorf("number %s is a negative zero; send 0", num)
}

// stringEnd returns the index of the quote that closes the string starting
// at raw[i], refusing a \uD800–\uDFFF escape that is not half of a valid
// surrogate pair.
func stringEnd(raw []byte, i int) (int, error) {
	for ; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			return i, nil
		case '\\':
			i++
			if i >= len(raw) || raw[i] != 'u' {
				continue
			}
			u, ok := hex4(raw, i+1)
			if !ok || u < 0xd800 || u > 0xdfff {
				continue
			}
			if u <= 0xdbff && i+10 < len(raw) && raw[i+5] == '\\' && raw[i+6] == 'u' {
				if lo, ok := hex4(raw, i+7); ok && lo >= 0xdc00 && lo <= 0xdfff {
					i += 10 // the pair's low half
					continue
				}
			}
			return 0, fmt.Errorf("lone surrogate escape \\%s: not a valid UTF-16 pair", raw[i:i+5])
		}
	}
	return i, nil
}

// hex4 reads the four hex digits at raw[i:i+4].
func hex4(raw []byte, i int) (rune, bool) {
	if i+4 > len(raw) {
		return 0, false
	}
	var r rune
	for _, c := range raw[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// countKeys counts the keys of every object in a decoded JSON value.
func countKeys(v any) int {
	n := 0
	switch v := v.(type) {
	case map[string]any:
		n += len(v)
		for _, e := range v {
			n += countKeys(e)
		}
	case []any:
		for _, e := range v {
			n += countKeys(e)
		}
	}
	return n
}

// buildValue decodes raw, one JSON value with whitespace around it, as
// encoding/json's Decoder with UseNumber does, in one pass (several times
// cheaper on the call path); false on anything else (malformed JSON, a key
// given twice in one object), which the Decoder then reports. Called after
// shape, so strings are valid UTF-8 without lone surrogates and nesting is
// bounded. FuzzBuildValue checks it against the Decoder.
func buildValue(raw []byte) (any, bool) {
	v, end, ok := buildAt(raw, jsonscan.Space(raw, 0))
	if !ok || jsonscan.Space(raw, end) != len(raw) {
		return nil, false
	}
	return v, true
}

func buildAt(b []byte, i int) (any, int, bool) {
	if i >= len(b) {
		return nil, 0, false
	}
	switch b[i] {
	case '{':
		m := map[string]any{}
		i = jsonscan.Space(b, i+1)
		if i < len(b) && b[i] == '}' {
			return m, i + 1, true
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return nil, 0, false
			}
			k, end, ok := buildString(b, i)
			if !ok {
				return nil, 0, false
			}
			if _, dup := m[k]; dup {
				return nil, 0, false
			}
			i = jsonscan.Space(b, end)
			if i >= len(b) || b[i] != ':' {
				return nil, 0, false
			}
			v, end, ok := buildAt(b, jsonscan.Space(b, i+1))
			if !ok {
				return nil, 0, false
			}
			m[k] = v
			next, last, err := jsonscan.AfterElem(b, end, '}')
			if err != nil {
				return nil, 0, false
			}
			if last {
				return m, next, true
			}
			i = next
		}
	case '[':
		a := []any{}
		i = jsonscan.Space(b, i+1)
		if i < len(b) && b[i] == ']' {
			return a, i + 1, true
		}
		for {
			v, end, ok := buildAt(b, i)
			if !ok {
				return nil, 0, false
			}
			a = append(a, v)
			next, last, err := jsonscan.AfterElem(b, end, ']')
			if err != nil {
				return nil, 0, false
			}
			if last {
				return a, next, true
			}
			i = next
		}
	case '"':
		s, end, ok := buildString(b, i)
		return s, end, ok
	case 't':
		end, err := jsonscan.Literal(b, i, "true")
		return true, end, err == nil
	case 'f':
		end, err := jsonscan.Literal(b, i, "false")
		return false, end, err == nil
	case 'n':
		end, err := jsonscan.Literal(b, i, "null")
		return nil, end, err == nil
	}
	end, err := jsonscan.Number(b, i)
	if err != nil {
		return nil, 0, false
	}
	return json.Number(b[i:end]), end, true
}

// buildString decodes the string starting at b[i]; one with escapes is
// decoded by encoding/json, so both read it the same.
func buildString(b []byte, i int) (string, int, bool) {
	end, esc, err := jsonscan.String(b, i)
	if err != nil {
		return "", 0, false
	}
	if !esc {
		return string(b[i+1 : end-1]), end, true
	}
	var s string
	if json.Unmarshal(b[i:end], &s) != nil {
		return "", 0, false
	}
	return s, end, true
}

func JSONKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}
