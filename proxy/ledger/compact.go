package ledger

import (
	"bytes"
	"encoding/json"
)

// appendCompact appends the JSON text src without its insignificant
// whitespace, exactly as json.Compact writes it, and refuses what
// json.Compact refuses, with its error. json.Compact's byte-by-byte scanner
// cost about half of an allow record's encoding; compactFast reads the
// arguments in one pass and leaves anything it does not read to
// json.Compact.
func appendCompact(dst, src []byte) ([]byte, error) {
	if out, ok := compactFast(dst, src); ok {
		return out, nil
	}
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, src); err != nil {
		return dst, err
	}
	return buf.Bytes(), nil
}

// compactMaxDepth is the nesting compactFast reads; deeper text goes to
// json.Compact (whose own limit is 10000).
const compactMaxDepth = 512

// compactFast is appendCompact for JSON text it reads whole; false (dst
// unchanged) for anything else: invalid text, or nesting deeper than
// compactMaxDepth. FuzzCompactFast checks it against json.Compact.
func compactFast(dst, src []byte) ([]byte, bool) {
	c := compactor{src: src, out: dst}
	c.skipSpace()
	if !c.value(0) {
		return dst, false
	}
	c.skipSpace()
	if c.i != len(src) {
		return dst, false
	}
	return c.out, true
}

type compactor struct {
	src, out []byte
	i        int
}

func (c *compactor) skipSpace() {
	for c.i < len(c.src) {
		switch c.src[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

func (c *compactor) value(depth int) bool {
	if c.i >= len(c.src) {
		return false
	}
	switch b := c.src[c.i]; {
	case b == '{', b == '[':
		return depth < compactMaxDepth && c.container(depth+1)
	case b == '"':
		return c.str()
	case b == '-' || '0' <= b && b <= '9':
		return c.number()
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	}
	return false
}

// container reads an object or an array.
func (c *compactor) container(depth int) bool {
	open := c.src[c.i]
	closer := byte(']')
	if open == '{' {
		closer = '}'
	}
	c.out = append(c.out, open)
	c.i++
	c.skipSpace()
	if c.i < len(c.src) && c.src[c.i] == closer {
		c.out = append(c.out, closer)
		c.i++
		return true
	}
	for {
		if open == '{' {
			if c.i >= len(c.src) || c.src[c.i] != '"' || !c.str() {
				return false
			}
			c.skipSpace()
			if c.i >= len(c.src) || c.src[c.i] != ':' {
				return false
			}
			c.out = append(c.out, ':')
			c.i++
			c.skipSpace()
		}
		if !c.value(depth) {
			return false
		}
		c.skipSpace()
		if c.i >= len(c.src) {
			return false
		}
		switch c.src[c.i] {
		case ',':
			c.out = append(c.out, ',')
			c.i++
			c.skipSpace()
		case closer:
			c.out = append(c.out, closer)
			c.i++
			return true
		default:
			return false
		}
	}
}

// str reads a string: no control characters, only JSON's escapes. Other
// bytes are copied as they are, as json.Compact copies them.
func (c *compactor) str() bool {
	start := c.i
	for i := start + 1; i < len(c.src); i++ {
		switch b := c.src[i]; {
		case b == '"':
			c.out = append(c.out, c.src[start:i+1]...)
			c.i = i + 1
			return true
		case b < 0x20:
			return false
		case b == '\\':
			i++
			if i >= len(c.src) {
				return false
			}
			switch c.src[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(c.src) {
					return false
				}
				for _, h := range c.src[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				i += 4
			default:
				return false
			}
		}
	}
	return false
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (c *compactor) number() bool {
	s, i := c.src, c.i
	digits := func() bool {
		start := i
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		return i > start
	}
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	c.out = append(c.out, s[c.i:i]...)
	c.i = i
	return true
}

func (c *compactor) literal(lit string) bool {
	if !bytes.HasPrefix(c.src[c.i:], []byte(lit)) {
		return false
	}
	c.out = append(c.out, lit...)
	c.i += len(lit)
	return true
}
