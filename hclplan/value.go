package hclplan

import (
	"bytes"
	"fmt"
	"regexp"

	"github.com/planlock/planlock/internal/canonjson"
)

// Value is a JSON value from a plan: nil, bool, string, json.Number, []any or
// map[string]any, with numbers kept as their exact decimal text.
type Value struct{ v any }

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
