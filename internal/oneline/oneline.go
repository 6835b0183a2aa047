// Package oneline is planlock's one sanitiser for text that goes on one line:
// an error from a peer, a reason in an answer to the agent, a log line. Every
// run of white space (newlines included) becomes one space, so a message can
// neither break a log line nor forge a new one; a limit cuts long text.
package oneline

import "strings"

// Of returns s on one line. With max > 0, text beyond max runes is cut and
// ends with "…".
func Of(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if max > 0 {
		if r := []rune(s); len(r) > max {
			s = string(r[:max]) + "…"
		}
	}
	return s
}
