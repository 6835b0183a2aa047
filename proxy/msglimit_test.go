package proxy

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// TestLimitLines checks the limiter's boundary: a line of exactly the limit
// (newline included) passes unchanged, one byte more is answered with an
// error carrying the request's id, wherever it sits, and the lines around a
// refused one still pass.
func TestLimitLines(t *testing.T) {
	const max = 64
	line := func(n int, id string) string { // n bytes including the newline
		head := `{"id":` + id + `,"x":"`
		return head + strings.Repeat("a", n-len(head)-3) + "\"}\n"
	}
	refusal := func(id string, size string) string {
		return `{"error":{"code":-32600,"message":"planlock: message of ` + size + ` bytes is larger than the limit of 64 bytes (--max-message-bytes); it was not read"},"id":` + id + `,"jsonrpc":"2.0"}` + "\n"
	}
	tests := []struct {
		name, in, pass, out string
	}{
		{"exactly the limit", line(64, "1"), line(64, "1"), ""},
		{"one byte over", line(65, "2"), "", refusal("2", "65")},
		{"id last", `{"x":"` + strings.Repeat("b", 100) + `","id":"abc"}` + "\n", "", refusal(`"abc"`, "120")},
		{"id inside params is not the id", `{"params":{"id":9},"x":"` + strings.Repeat("c", 100) + `"}` + "\n", "", refusal("null", "127")},
		{"no id", strings.Repeat("d", 200) + "\n", "", refusal("null", "201")},
		{"unterminated last line", line(64, "3")[:63] + strings.Repeat("e", 10), "", refusal("3", "73")},
		{"lines around a refused one", "{}\n" + line(300, "4") + "[]\n\n", "{}\n[]\n\n", refusal("4", "300")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pass, out bytes.Buffer
			if err := copyLimited(context.Background(), strings.NewReader(tt.in), &pass, &out, max, io.Discard); err != nil {
				t.Fatal(err)
			}
			if pass.String() != tt.pass {
				t.Errorf("passed %q, want %q", pass.String(), tt.pass)
			}
			if out.String() != tt.out {
				t.Errorf("answered %q\nwant     %q", out.String(), tt.out)
			}
		})
	}
}
