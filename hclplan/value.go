package hclplan

import (
	"github.com/planlock/planlock/internal/canonjson"

	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
)

// Value is a JSON value from a plan: nil, bool, string, json.Number, []any or
// map[string]any, with numbers kept as their exact decimal text.
type Value struct{ v any }

// NewValue wraps a JSON-like Go value (as decoded by encoding/json, with or
// without UseNumber). Numbers are normalised to json.Number.
func NewValue(v any) (Value, error) {
	n, err := normalize(v, 0)
	if err != nil {
		return Value{}, err
	}
	return Value{v: n}, nil
}

// Interface returns the value as nil, bool, string, json.Number, []any or
// map[string]any.
func (v Value) Interface() any { return v.v }

// MarshalJSON writes the value in canonical form: object keys sorted, no
// insignificant space, numbers as written in the plan.
func (v Value) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	if err := canonjson.Write(&b, v.v, 0); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// String returns the canonical JSON text of the value.
func (v Value) String() string {
	b, err := v.MarshalJSON()
	if err != nil {
		return fmt.Sprintf("%v", v.v)
	}
	return string(b)
}

// Equal reports whether x, a decoded JSON value, equals v by JSON value:
// numbers compare numerically (30 equals 30.0, not "30").
func (v Value) Equal(x any) bool { return canonjson.Equal(v.v, x) }

const maxDepth = 10000

func normalize(v any, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", maxDepth)
	}
	switch t := v.(type) {
	case nil, bool, string:
		return t, nil
	case json.Number:
		if _, err := ParseNumber(string(t)); err != nil {
			return nil, err
		}
		return t, nil
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return nil, fmt.Errorf("%v is not a JSON number", t)
		}
		return json.Number(strconv.FormatFloat(t, 'g', -1, 64)), nil
	case int:
		return json.Number(strconv.Itoa(t)), nil
	case int64:
		return json.Number(strconv.FormatInt(t, 10)), nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			n, err := normalize(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			n, err := normalize(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	default:
		return nil, fmt.Errorf("unsupported value of type %T", v)
	}
}

// Number is an exact JSON number (package canonjson's).
type Number = canonjson.Number

// Bounds of a JSON number (see canonjson).
const (
	MaxNumberLength   = canonjson.MaxNumberLength
	MaxNumberExponent = canonjson.MaxNumberExponent
)

// CheckNumber refuses number text beyond MaxNumberLength characters or an
// exponent beyond ±MaxNumberExponent.
func CheckNumber[T string | []byte](s T) error { return canonjson.CheckNumber(s) }

// ParseNumber parses JSON number text exactly, within CheckNumber's bounds.
func ParseNumber(s string) (Number, error) { return canonjson.ParseNumber(s) }

// MustNumber is ParseNumber for constants in tests and code.
func MustNumber(s string) Number { return canonjson.MustNumber(s) }

// Pattern is an RE2 expression that must match a whole string.
type Pattern struct {
	Source string
	re     *regexp.Regexp
}

// CompilePattern anchors expr at both ends: "abc" does not match "xabcx".
func CompilePattern(expr string) (*Pattern, error) {
	re, err := regexp.Compile(`\A(?:` + expr + `)\z`)
	if err != nil {
		// Report the error against the user's expression, not our wrapper.
		if _, err2 := regexp.Compile(expr); err2 != nil {
			return nil, err2
		}
		return nil, err
	}
	return &Pattern{Source: expr, re: re}, nil
}

// MatchString reports whether the whole of s matches.
func (p *Pattern) MatchString(s string) bool { return p.re.MatchString(s) }
