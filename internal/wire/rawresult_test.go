package wire

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRelayResult checks that a plain tool result reaches the client with
// its content items as the upstream wrote them (members mcp-go does not
// model included), that the outcome still reads its text, and that what
// the fast path does not cover goes through mcp-go's parser: results with
// _meta keep it, and results mcp-go refuses are refused.
func TestRelayResult(t *testing.T) {
	tests := []struct {
		name, in, out, text, err string
	}{
		{"text", `{"content":[{"type":"text","text":"hi"}]}`, `{"content":[{"type":"text","text":"hi"}]}`, "hi", ""},
		{"unmodelled member kept", `{"content":[{"type":"text","text":"hi","x-extra":[1,2]}],"isError":true}`,
			`{"content":[{"type":"text","text":"hi","x-extra":[1,2]}],"isError":true}`, "hi", ""},
		{"structured raw", `{"content":[{"type":"text","text":"{}"}],"structuredContent":{"b":1,"a":2.50}}`,
			`{"content":[{"type":"text","text":"{}"}],"structuredContent":{"b":1,"a":2.50}}`, "{}", ""},
		{"image has no text", `{"content":[{"type":"image","data":"AA==","mimeType":"image/png"}]}`,
			`{"content":[{"type":"image","data":"AA==","mimeType":"image/png"}]}`, "(no text)", ""},
		{"meta through mcp-go", `{"_meta":{"k":"v"},"content":[{"type":"text","text":"hi"}]}`,
			`{"_meta":{"k":"v"},"content":[{"type":"text","text":"hi"}]}`, "hi", ""},
		{"no content", `{"isError":false}`, "", "", "content is missing"},
		{"content not an object", `{"content":["hi"]}`, "", "", "unmarshal"},
		{"unknown content type", `{"content":[{"type":"hologram"}]}`, "", "", "hologram"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := RelayResult(json.RawMessage(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.out {
				t.Errorf("relayed %s\nwant    %s", b, tt.out)
			}
			got := "(no text)"
			for _, c := range r.Content {
				if text, ok := ContentText(c); ok {
					got = text
					break
				}
			}
			if got != tt.text {
				t.Errorf("first text %q, want %q", got, tt.text)
			}
		})
	}
}
