package proxy

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeArgs(t *testing.T) {
	deep := func(n int) string { return `{"a":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}` }
	tests := []struct {
		name, raw, err string // err "" = accepted
	}{
		{"plain", `{"order_id":"4711","amount":30}`, ""},
		{"colons and quotes inside strings", `{"a:b":"x:y","c":"q\":r","d\\":"\\"}`, ""},
		{"same key in sibling objects", `{"a":{"k":1},"b":{"k":2},"c":[{"k":1},{"k":2}]}`, ""},
		{"repeated top-level key", `{"amount":1,"amount":300}`, `key "amount" appears twice in one object`},
		{"repeated nested key", `{"a":{"b":1,"b":2}}`, `key "b" appears twice in one object`},
		{"repeated key in an array's object", `{"a":[{"k":1},{"k":1,"k":2}]}`, `key "k" appears twice in one object`},
		{"repeated key through an escape", `{"k":1,"\u006b":2}`, `key "k" appears twice in one object`},
		{"64 levels", deep(64), ""},
		{"65 levels", deep(65), "nested deeper than 64 levels"},
		{"invalid UTF-8", "{\"a\":\"\xc3\x28\"}", "invalid UTF-8"},
		{"trailing data", `{} {}`, "trailing data"},
		{"not an object", `[]`, "got an array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeArgs([]byte(tt.raw))
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.err != "" && (err == nil || err.Error() != tt.err):
				t.Fatalf("got %v, want %q", err, tt.err)
			}
		})
	}
}

// FuzzDecodeArgs: whatever decodeArgs accepts has no repeated key and no
// nesting over the limit (the slow token walk agrees), so the value the
// gate checks is the only reading of the bytes the upstream receives.
func FuzzDecodeArgs(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":1,"a":2}`, `{"a":{"b":[{"c":"x:y\"","c":1}]}}`, `{"\u0061":1,"a":2}`, `[]`, `{"a":"\\"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := decodeArgs(raw)
		if err != nil {
			return
		}
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		v, serr := strictValue(d, 0)
		if serr != nil {
			t.Fatalf("accepted %q, but the strict walk refuses it: %v", raw, serr)
		}
		if !reflect.DeepEqual(v, any(m)) {
			t.Fatalf("accepted %q as %v, the strict walk reads %v", raw, m, v)
		}
	})
}
