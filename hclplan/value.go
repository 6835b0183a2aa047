package hclplan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"sort"
	"strconv"
	"unicode/utf8"
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
	if err := writeCanonical(&b, v.v, 0); err != nil {
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
func (v Value) Equal(x any) bool { return jsonEqual(v.v, x) }

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

// CanonicalJSON writes a decoded JSON value with sorted object keys and no
// insignificant space; two equal argument objects give the same bytes, which
// is what a hold approval binds to.
func CanonicalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := writeCanonical(&b, v, 0); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// errCapped stops writeCanonical once the output reached its limit.
var errCapped = errors.New("value longer than the rendering limit")

// writeCanonical writes v canonically; with limit > 0 it stops with
// errCapped after about limit bytes, without first copying a huge value.
func writeCanonical(b *bytes.Buffer, v any, limit int) error {
	if limit > 0 && b.Len() >= limit {
		return errCapped
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
			return errCapped
		}
	case json.Number:
		n, err := ParseNumber(string(t))
		if err != nil {
			if limit > 0 {
				// Rendering for a message: show the refused text, cut.
				b.WriteString(string(t[:min(len(t), limit)]))
				if len(t) > limit {
					return errCapped
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
			if err := writeCanonical(b, e, limit); err != nil {
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
			if err := writeCanonical(b, t[k], limit); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case Value:
		return writeCanonical(b, t.v, limit)
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

// jsonEqual compares two decoded JSON values by value.
func jsonEqual(a, b any) bool {
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
			if !jsonEqual(x[i], y[i]) {
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
			if !ok || !jsonEqual(xv, yv) {
				return false
			}
		}
		return true
	default:
		xn, ok := toNumber(a)
		if !ok {
			return false
		}
		yn, ok := toNumber(b)
		return ok && xn.Cmp(yn) == 0
	}
}

// Number is an exact JSON number. Comparisons are exact for any size and
// precision; the common case (short literals) avoids big arithmetic.
type Number struct {
	text  string
	f     float64
	exact bool     // f compares exactly with other exact numbers
	r     *big.Rat // set when !exact
}

// Bounds of a JSON number, checked before any exact arithmetic: big.Rat
// parses a long mantissa in quadratic time (a 4 MB number cost about 45 s of
// CPU) and an exponent costs a power of ten of that many digits. Within
// them, the costliest number parses and compares in microseconds.
const (
	MaxNumberLength   = 100 // characters of the number's text
	MaxNumberExponent = 400 // largest |exponent| written after e or E
)

// CheckNumber refuses number text longer than MaxNumberLength characters or
// with an exponent beyond ±MaxNumberExponent, looking at no more than that
// many bytes. It does not check the rest of JSON's number grammar.
func CheckNumber[T string | []byte](s T) error {
	if len(s) > MaxNumberLength {
		return fmt.Errorf("number %s…(%d characters) is longer than %d characters", string(s[:20]), len(s), MaxNumberLength)
	}
	i := 0
	for i < len(s) && s[i] != 'e' && s[i] != 'E' {
		i++
	}
	if i == len(s) {
		return nil
	}
	i++
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	for i < len(s) && s[i] == '0' {
		i++
	}
	exp := 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		if exp = exp*10 + int(s[i]-'0'); exp > MaxNumberExponent {
			return fmt.Errorf("number %s has an exponent beyond ±%d", string(s), MaxNumberExponent)
		}
	}
	return nil
}

// ParseNumber parses JSON number text exactly. Text out of CheckNumber's
// bounds is refused before any arithmetic.
func ParseNumber(s string) (Number, error) {
	if err := CheckNumber(s); err != nil {
		return Number{}, err
	}
	if !isJSONNumber(s) {
		return Number{}, fmt.Errorf("%q is not a JSON number", s)
	}
	return parseValidNumber(s)
}

func parseValidNumber(s string) (Number, error) {
	// Up to 15 significant digits and a modest exponent, two distinct
	// decimals never round to the same float64, so float comparison is exact.
	if sig, exp, ok := shortDecimal(s); ok && sig <= 15 && exp > -290 && exp < 290 {
		f, err := strconv.ParseFloat(s, 64)
		if err == nil {
			return Number{text: s, f: f, exact: true}, nil
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return Number{}, fmt.Errorf("%q is not a number", s)
	}
	f, _ := r.Float64()
	return Number{text: s, f: f, r: r}, nil
}

// isJSONNumber reports whether s is a number in JSON's grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?
func isJSONNumber(s string) bool {
	i, n := 0, len(s)
	digits := func() int {
		start := i
		for i < n && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - start
	}
	if i < n && s[i] == '-' {
		i++
	}
	switch {
	case i < n && s[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < n && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < n && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < n && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == n
}

// shortDecimal counts the significant digits and the exponent of s, a valid
// JSON number, without allocating.
func shortDecimal(s string) (sig, exp int, ok bool) {
	first, last := -1, -1 // positions of the first and last non-zero digit
	pos := 0
	i := 0
	for ; i < len(s) && s[i] != 'e' && s[i] != 'E'; i++ {
		c := s[i]
		if c < '0' || c > '9' {
			continue
		}
		if c != '0' {
			if first < 0 {
				first = pos
			}
			last = pos
		}
		pos++
	}
	if i < len(s) {
		n, err := strconv.Atoi(s[i+1:])
		if err != nil {
			return 0, 0, false
		}
		exp = n
	}
	if first < 0 {
		return 0, exp, true
	}
	return last - first + 1, exp, true
}

// MustNumber is ParseNumber for constants in tests and code.
func MustNumber(s string) Number {
	n, err := ParseNumber(s)
	if err != nil {
		panic(err)
	}
	return n
}

// String returns the number as written.
func (n Number) String() string { return n.text }

// Canonical returns a canonical text for the number: integers without
// exponent or fraction where that is short, otherwise the shortest exact form.
func (n Number) Canonical() string {
	r := n.rat()
	if r.IsInt() && len(r.Num().String()) <= 30 {
		return r.Num().String()
	}
	if n.exact {
		return strconv.FormatFloat(n.f, 'g', -1, 64)
	}
	return n.text
}

func (n Number) rat() *big.Rat {
	if n.r != nil {
		return n.r
	}
	r, _ := new(big.Rat).SetString(n.text)
	return r
}

// Cmp compares n and m: -1, 0 or +1.
func (n Number) Cmp(m Number) int {
	if n.exact && m.exact {
		switch {
		case n.f < m.f:
			return -1
		case n.f > m.f:
			return 1
		}
		return 0
	}
	return n.rat().Cmp(m.rat())
}

// Float64 returns the nearest float64.
func (n Number) Float64() float64 { return n.f }

// toNumber reads a decoded JSON number (json.Number, float64 or an integer).
func toNumber(v any) (Number, bool) {
	switch t := v.(type) {
	case json.Number:
		n, err := ParseNumber(string(t))
		return n, err == nil
	case Number:
		return t, true
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return Number{}, false
		}
		s := strconv.FormatFloat(t, 'g', -1, 64)
		n, err := parseValidNumber(s)
		return n, err == nil
	case int:
		return Number{text: strconv.Itoa(t), f: float64(t), exact: t > -1e15 && t < 1e15}.fill(), true
	case int64:
		return Number{text: strconv.FormatInt(t, 10), f: float64(t), exact: t > -1e15 && t < 1e15}.fill(), true
	}
	return Number{}, false
}

func (n Number) fill() Number {
	if !n.exact {
		n.r, _ = new(big.Rat).SetString(n.text)
	}
	return n
}

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
