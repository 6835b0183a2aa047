package canonjson

import (
	"encoding/json"
	"fmt"
)

// DuplicateKeyError is a key given twice in one object.
type DuplicateKeyError struct{ Key string }

func (e *DuplicateKeyError) Error() string {
	return fmt.Sprintf("key %q appears twice in one object", e.Key)
}

// TooDeepError is nesting past the bound DecodeValue was given.
type TooDeepError struct{ Max int }

func (e *TooDeepError) Error() string { return fmt.Sprintf("nested deeper than %d levels", e.Max) }

// DecodeValue reads one JSON value from d (which should UseNumber) token by
// token, refusing a key given twice in one object (after unescaping, which
// encoding/json's maps would merge silently), an object or array inside
// maxDepth others, and, with checkNumbers, a number CheckNumber refuses.
func DecodeValue(d *json.Decoder, maxDepth int, checkNumbers bool) (any, error) {
	return decodeValue(d, 0, maxDepth, checkNumbers)
}

func decodeValue(d *json.Decoder, depth, maxDepth int, checkNumbers bool) (any, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		if n, isNum := tok.(json.Number); isNum && checkNumbers {
			if err := CheckNumber(string(n)); err != nil {
				return nil, err
			}
		}
		return tok, nil
	}
	if depth >= maxDepth {
		return nil, &TooDeepError{Max: maxDepth}
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
				return nil, &DuplicateKeyError{Key: k}
			}
			v, err := decodeValue(d, depth+1, maxDepth, checkNumbers)
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
			v, err := decodeValue(d, depth+1, maxDepth, checkNumbers)
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
