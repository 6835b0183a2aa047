package proxy

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestResultDocumentIsStrict: the document a pin reads is decoded like
// arguments, so the value compared with the plan is its only reading, and
// a number in it is bounded before the comparison does arithmetic.
func TestResultDocumentIsStrict(t *testing.T) {
	structured := func(doc string) json.RawMessage {
		return json.RawMessage(`{"content":[],"structuredContent":` + doc + `}`)
	}
	text := func(doc string) json.RawMessage {
		b, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": doc}}})
		return b
	}
	tests := []struct {
		name string
		raw  json.RawMessage
		err  string // "" = accepted
	}{
		{"structured", structured(`{"hash":"abc","n":-0}`), ""},
		{"text", text(`{"hash":"abc"}`), ""},
		{"not JSON", text(`hash`), "the result is not JSON read one way only: invalid character 'h' looking for beginning of value"},
		{"repeated key", structured(`{"hash":"abc","hash":"def"}`), `the result is not JSON read one way only: key "hash" appears twice in one object`},
		{"lone surrogate", text(`{"hash":"\ud800"}`), `the result is not JSON read one way only: lone surrogate escape \ud800: not a valid UTF-16 pair`},
		{"long number", structured(`{"n":` + strings.Repeat("1", 4<<20) + `}`), "the result is not JSON read one way only: number 11111111111111111111…(4194304 characters) is longer than 100 characters"},
		{"tiny number", text(`{"n":1e-999999}`), "the result is not JSON read one way only: number 1e-999999 has an exponent beyond ±400"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := resultDocument(tt.raw)
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.err != "" && (err == nil || err.Error() != tt.err):
				t.Fatalf("got %v, want %q", err, tt.err)
			}
		})
	}
}
