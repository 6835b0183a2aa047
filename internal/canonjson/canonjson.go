// Package canonjson is the canonical JSON form planlock binds approvals and
// audit records to (sorted object keys, no insignificant space, numbers in
// their exact canonical text) and the exact JSON numbers it is made of. It is
// a leaf: the plan language (hclplan) and the durable state (proxy/ledger)
// both use it, and neither depends on the other for it.
package canonjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"unicode/utf8"
)

// Marshal writes a decoded JSON value with sorted object keys and no
// insignificant space; two equal argument objects give the same bytes, which
// is what a hold approval binds to.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := Write(&b, v, 0); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ErrCapped stops Write once the output reached its limit.
var ErrCapped = errors.New("value longer than the rendering limit")

// Write writes v canonically; with limit > 0 it stops with
// errCapped after about limit bytes, without first copying a huge value.
func Write(b *bytes.Buffer, v any, limit int) error {
	if limit > 0 && b.Len() >= limit {
		return ErrCapped
	}
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if t {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case string:
		capped := false
		if limit > 0 && len(t) > limit {
			cut := limit
			for cut > 0 && !utf8.RuneStart(t[cut]) {
				cut--
			}
			t, capped = t[:cut], true
		}
		enc, err := marshalNoEscape(t)
		if err != nil {
			return err
		}
		b.Write(enc)
		if capped {
			return ErrCapped
		}
	case json.Number:
		n, err := ParseNumber(string(t))
		if err != nil {
			if limit > 0 {
				// Rendering for a message: show the refused text, cut.
				b.WriteString(string(t[:min(len(t), limit)]))
				if len(t) > limit {
					return ErrCapped
				}
				return nil
			}
			return err
		}
		b.WriteString(n.Canonical())
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return fmt.Errorf("%v is not a JSON number", t)
		}
		b.WriteString(strconv.FormatFloat(t, 'g', -1, 64))
	case int:
		b.WriteString(strconv.Itoa(t))
	case int64:
		b.WriteString(strconv.FormatInt(t, 10))
	case []any:
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := Write(b, e, limit); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			enc, err := marshalNoEscape(k)
			if err != nil {
				return err
			}
			b.Write(enc)
			b.WriteByte(':')
			if err := Write(b, t[k], limit); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case interface{ Interface() any }: // a plan's value (hclplan.Value)
		return Write(b, t.Interface(), limit)
	default:
		return fmt.Errorf("unsupported value of type %T", v)
	}
	return nil
}

func marshalNoEscape(s string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Equal compares two decoded JSON values by value: numbers compare
// numerically (30 equals 30.0, not "30").
func Equal(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !Equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !Equal(xv, yv) {
				return false
			}
		}
		return true
	default:
		xn, ok := ToNumber(a)
		if !ok {
			return false
		}
		yn, ok := ToNumber(b)
		return ok && xn.Cmp(yn) == 0
	}
}
