package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// maxArgDepth bounds the nesting of call arguments; encoding/json allows
// 10000, far beyond any tool's schema.
const maxArgDepth = 64

// decodeArgs decodes a call's arguments: one JSON object, numbers kept exact.
//
// The gate checks the decoded value while the upstream receives the raw
// bytes, so every input that two JSON parsers may read differently is
// refused here: a repeated key (encoding/json keeps the last value, other
// parsers the first) and invalid UTF-8 (replaced by U+FFFD here, kept or
// rejected elsewhere). What is checked is then what the upstream reads.
func decodeArgs(raw []byte) (map[string]any, error) {
	if !utf8.Valid(raw) {
		return nil, errors.New("invalid UTF-8")
	}
	members, depth := shape(raw)
	if depth > maxArgDepth {
		return nil, fmt.Errorf("nested deeper than %d levels", maxArgDepth)
	}
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
		if _, err := strictValue(sd, 0); err != nil {
			return nil, err
		}
		return nil, errors.New("a key appears twice in one object")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("got %s", jsonKind(v))
	}
	return m, nil
}

// shape counts the object members of a JSON text (the colons outside
// strings) and its deepest nesting, in one pass over the bytes.
func shape(raw []byte) (members, depth int) {
	inString, escaped, cur := false, false, 0
	for _, c := range raw {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case ':':
			members++
		case '{', '[':
			cur++
			depth = max(depth, cur)
		case '}', ']':
			cur--
		}
	}
	return members, depth
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

// strictValue reads one JSON value token by token, refusing repeated keys
// and nesting deeper than maxArgDepth.
func strictValue(d *json.Decoder, depth int) (any, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	if depth >= maxArgDepth {
		return nil, fmt.Errorf("nested deeper than %d levels", maxArgDepth)
	}
	switch delim {
	case '{':
		m := map[string]any{}
		for d.More() {
			kt, err := d.Token()
			if err != nil {
				return nil, err
			}
			k, ok := kt.(string)
			if !ok {
				return nil, fmt.Errorf("object key %v is not a string", kt)
			}
			if _, dup := m[k]; dup {
				return nil, fmt.Errorf("key %q appears twice in one object", k)
			}
			v, err := strictValue(d, depth+1)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		if _, err := d.Token(); err != nil { // '}'
			return nil, err
		}
		return m, nil
	case '[':
		a := []any{}
		for d.More() {
			v, err := strictValue(d, depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		if _, err := d.Token(); err != nil { // ']'
			return nil, err
		}
		return a, nil
	}
	return nil, fmt.Errorf("unexpected %v", delim)
}
