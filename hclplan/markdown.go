package hclplan

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MarkdownCode renders a plan-supplied (or agent-supplied) string as a
// Markdown code span on one line: the one escaping function for every such
// string planlock writes into a pull request body or comment.
//
// Inside a code span CommonMark and GitHub interpret nothing: no HTML (so
// "<!--" cannot hide the rest of the page), no emphasis, links, mentions or
// entities. What is left to handle: the fence is one backtick longer than
// any run inside, so the string cannot close it; line breaks and other
// control characters are shown as \n-style escapes, so the string cannot
// start a new block; zero-width, bidirectional and other invisible format
// characters are shown as \u escapes, so what the reviewer reads is what
// the proxy enforces.
func MarkdownCode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case invisible(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	c := b.String()
	if c == "" {
		return "` `"
	}
	fence := strings.Repeat("`", longestBacktickRun(c)+1)
	// CommonMark strips one space from each end when both ends have one;
	// padding keeps a leading or trailing backtick or space as written.
	if c[0] == '`' || c[0] == ' ' || c[len(c)-1] == '`' || c[len(c)-1] == ' ' {
		c = " " + c + " "
	}
	return fence + c + fence
}

// invisible reports characters a reader cannot see or that reorder what
// they see: controls, format characters (zero-width, bidi controls, BOM,
// soft hyphen), line and paragraph separators, and spaces other than the
// ASCII space (a no-break space can pose as one).
func invisible(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) ||
		unicode.In(r, unicode.Zl, unicode.Zp) || (unicode.Is(unicode.Zs, r) && r != ' ') ||
		r == '\u115f' || r == '\u1160' || r == '\u3164' || r == '\uffa0' // Hangul fillers render blank
}

func longestBacktickRun(s string) int {
	longest, n := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			n++
			longest = max(longest, n)
		} else {
			n = 0
		}
	}
	return longest
}
