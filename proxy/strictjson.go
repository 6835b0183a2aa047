package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	v, err := strictValue(d, 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("trailing data")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("got %s", jsonKind(v))
	}
	return m, nil
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
