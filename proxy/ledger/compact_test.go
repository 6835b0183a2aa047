package ledger

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/planlock/planlock/internal/jsonscan"
)

// compactCases are JSON texts and not-quite JSON texts around every rule
// compactFast reads.
var compactCases = []string{
	`{}`, `[]`, ` { } `, `{"a":1}`, "{ \"a\" :\t1 ,\n\"b\": [ 1 , 2 ] }\r\n",
	`{"order_id":"4711","amount":30,"currency":"EUR","note":"damaged in transit"}`,
	`"a b"`, `"\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00"`, "\"é\xff\"", `0`, `-0`, `-1.5e+10`, `1E-2`, `12.0`,
	`true`, `false`, `null`, `[true,false,null]`, `{"a":{"b":{"c":[[]]}}}`, `[1,"x",{"k":null}]`,
	// refused
	``, ` `, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[,1]`, `{a:1}`, `{"a":1 "b":2}`,
	`01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `0x10`, `1 2`, `{}{}`, `"a`, "\"a\tb\"", `"\x"`,
	`"\u12"`, `"\u12G4"`, `tru`, `nul`, `True`, `NaN`, `[1]]`, `{"a":1}}`, "\x00", `[` + "\u00a0" + `]`,
	strings.Repeat("[", jsonscan.MaxDepth) + strings.Repeat("]", jsonscan.MaxDepth),
	strings.Repeat("[", jsonscan.MaxDepth+1) + strings.Repeat("]", jsonscan.MaxDepth+1),
}

// TestAppendCompact: appendCompact writes and refuses what json.Compact
// does, and the fast path reads the usual JSON itself.
func TestAppendCompact(t *testing.T) {
	for _, src := range compactCases {
		var want bytes.Buffer
		werr := json.Compact(&want, []byte(src))
		got, gerr := appendCompact([]byte("x"), []byte(src))
		if (gerr != nil) != (werr != nil) {
			t.Fatalf("%.40q: error %v, json.Compact's %v", src, gerr, werr)
		}
		if werr != nil {
			if gerr.Error() != werr.Error() || string(got) != "x" {
				t.Fatalf("%.40q: got %q and error %v, want json.Compact's error %v", src, got, gerr, werr)
			}
			continue
		}
		if string(got) != "x"+want.String() {
			t.Fatalf("%.40q: got %q, want %q", src, got, "x"+want.String())
		}
		if _, fast := compactFast(nil, []byte(src)); !fast {
			t.Fatalf("%.40q: valid JSON left to json.Compact", src)
		}
	}
}

// FuzzCompactFast: whatever compactFast reads, json.Compact reads too, and
// writes the same bytes.
func FuzzCompactFast(f *testing.F) {
	for _, s := range compactCases {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		got, ok := compactFast(nil, src)
		if !ok {
			return
		}
		var want bytes.Buffer
		if err := json.Compact(&want, src); err != nil {
			t.Fatalf("%q: compactFast read it as %q, json.Compact refuses it: %v", src, got, err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("%q: compactFast %q, json.Compact %q", src, got, want.Bytes())
		}
	})
}

// CheckArgs refuses exactly the arguments an allow record refuses, with
// the same error.
func TestCheckArgsAsRecords(t *testing.T) {
	for _, args := range []string{``, `{}`, `{"a": [1, 2]}`, ` "x" `, `{"id":`, `{"a":1}}`, `nul`, "{\"a\":\"\xff\"}", `[1,]`} {
		for _, redact := range []bool{false, true} {
			r := record{Type: typeDecision}
			err := argsFields(&r, json.RawMessage(args), redact)
			if err == nil {
				if _, eerr := encodeBody(&r); eerr != nil {
					err = fmt.Errorf("%w: %v", ErrInvalidArgument, eerr)
				}
			}
			got := CheckArgs(json.RawMessage(args), redact)
			if (got == nil) != (err == nil) || (err != nil && got.Error() != err.Error()) {
				t.Errorf("%q (redact %v): CheckArgs %v, the record %v", args, redact, got, err)
			}
		}
	}
}
