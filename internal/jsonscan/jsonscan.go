// Package jsonscan reads JSON text without decoding it: each function
// checks the syntax of one value (or the whitespace, or what follows a
// member) starting at an index and returns where it ends, accepting exactly
// what encoding/json accepts, up to its nesting limit. The relay's envelope
// scan (internal/wire, fuzzed against encoding/json) and the ledger's
// compaction of arguments share it.
package jsonscan

import "errors"

// MaxDepth is encoding/json's nesting limit; deeper text is refused.
const MaxDepth = 10000

// ErrSyntax is every function's error: the text is not JSON.
var ErrSyntax = errors.New("not plain JSON")

// Space returns the index of the first byte at or after i that is not JSON
// whitespace.
func Space(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// Value returns the end of the JSON value starting at b[i], checking
// its syntax as encoding/json does.
func Value(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return 0, ErrSyntax
	}
	switch c := b[i]; {
	case c == '"':
		end, _, err := String(b, i)
		return end, err
	case c == '{':
		return object(b, i, depth+1)
	case c == '[':
		return array(b, i, depth+1)
	case c == 't':
		return Literal(b, i, "true")
	case c == 'f':
		return Literal(b, i, "false")
	case c == 'n':
		return Literal(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return Number(b, i)
	}
	return 0, ErrSyntax
}

// Literal returns the end of lit, which must start at b[i].
func Literal(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, ErrSyntax
	}
	return i + len(lit), nil
}

// String returns the end of the string starting at b[i] (past its
// closing quote) and whether it holds an escape.
func String(b []byte, i int) (end int, esc bool, err error) {
	i++
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, esc, nil
		case c == '\\':
			esc = true
			if i+1 >= len(b) {
				return 0, esc, ErrSyntax
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return 0, esc, ErrSyntax
				}
				i += 6
			default:
				return 0, esc, ErrSyntax
			}
		case c < 0x20:
			return 0, esc, ErrSyntax
		default:
			i++
		}
	}
	return 0, esc, ErrSyntax
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// Number returns the end of the number starting at b[i].
func Number(b []byte, i int) (int, error) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return 0, ErrSyntax
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return 0, ErrSyntax
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return 0, ErrSyntax
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	return i, nil
}

func object(b []byte, i, depth int) (int, error) {
	return EachMember(b, i, depth, nil)
}

// EachMember checks the syntax of the object starting at b[i] (nested at
// depth) and returns its end; f, when set, sees each member's key (without
// its quotes; esc when it holds an escape) and raw value, and stops the
// walk, as malformed, by returning false.
func EachMember(b []byte, i, depth int, f func(key []byte, esc bool, val []byte) bool) (int, error) {
	if depth > MaxDepth {
		return 0, ErrSyntax
	}
	i = Space(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, ErrSyntax
		}
		ks := i
		ke, esc, err := String(b, i)
		if err != nil {
			return 0, err
		}
		i = Space(b, ke)
		if i >= len(b) || b[i] != ':' {
			return 0, ErrSyntax
		}
		vs := Space(b, i+1)
		ve, err := Value(b, vs, depth)
		if err != nil {
			return 0, err
		}
		if f != nil && !f(b[ks+1:ke-1], esc, b[vs:ve]) {
			return 0, ErrSyntax
		}
		next, end, err := AfterElem(b, ve, '}')
		if err != nil || end {
			return next, err
		}
		i = next
	}
}

func array(b []byte, i, depth int) (int, error) {
	if depth > MaxDepth {
		return 0, ErrSyntax
	}
	i = Space(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		ve, err := Value(b, i, depth)
		if err != nil {
			return 0, err
		}
		next, end, err := AfterElem(b, ve, ']')
		if err != nil || end {
			return next, err
		}
		i = next
	}
}

// AfterElem reads what follows a member or element that ends at b[i]: a
// comma (next is where the following one starts) or closer (end; next is
// past it). Anything else is malformed.
func AfterElem(b []byte, i int, closer byte) (next int, end bool, err error) {
	i = Space(b, i)
	if i >= len(b) {
		return 0, false, ErrSyntax
	}
	switch b[i] {
	case ',':
		return Space(b, i+1), false, nil
	case closer:
		return i + 1, true, nil
	}
	return 0, false, ErrSyntax
}
