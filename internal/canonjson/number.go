package canonjson

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
)

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

// Rat returns the number's exact value (a fresh copy: the caller may
// change it).
func (n Number) Rat() *big.Rat { return new(big.Rat).Set(n.rat()) }

// IsInt reports whether the number is a whole number.
func (n Number) IsInt() bool { return n.rat().IsInt() }

// MarshalJSON writes a number as its exact canonical text.
func (n Number) MarshalJSON() ([]byte, error) { return []byte(n.Canonical()), nil }

// Float64 returns the nearest float64.
func (n Number) Float64() float64 { return n.f }

// ToNumber reads a decoded JSON number (json.Number, float64 or an integer).
func ToNumber(v any) (Number, bool) {
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
