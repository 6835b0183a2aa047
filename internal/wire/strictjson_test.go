package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/canonjson"
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
		{"trailing garbage", `{}x`, "trailing data"},
		{"not an object", `[]`, "got an array"},
		// Inputs two JSON parsers may read differently, each refused or
		// shown to be read one way only.
		{"look-alike key through an escape", `{"a":1,"\u0061":2}`, `key "a" appears twice in one object`},
		{"look-alike key, escaped first", `{"\u0061":1,"a":2}`, `key "a" appears twice in one object`},
		{"look-alike key, raw and escaped pair", `{"😀":1,"\ud83d\ude00":2}`, `key "😀" appears twice in one object`},
		{"look-alike nested key", `{"x":[{"b":1,"\u0062":2}]}`, `key "b" appears twice in one object`},
		{"valid surrogate pair", `{"a":"\ud83d\ude00","\uD83D\uDE00":1}`, ""},
		{"lone high surrogate", `{"a":"\ud800"}`, `lone surrogate escape \ud800: not a valid UTF-16 pair`},
		{"lone low surrogate", `{"a":"\udfff"}`, `lone surrogate escape \udfff: not a valid UTF-16 pair`},
		{"lone surrogate, upper case", `{"a":"x\uDBFFy"}`, `lone surrogate escape \uDBFF: not a valid UTF-16 pair`},
		{"high surrogate then a non-surrogate", `{"a":"\ud800\u0041"}`, `lone surrogate escape \ud800: not a valid UTF-16 pair`},
		{"two high surrogates", `{"a":"\ud800\ud800"}`, `lone surrogate escape \ud800: not a valid UTF-16 pair`},
		{"reversed pair", `{"a":"\ude00\ud83d"}`, `lone surrogate escape \ude00: not a valid UTF-16 pair`},
		{"high surrogate at the end of a string", `{"a":"x\ud800"}`, `lone surrogate escape \ud800: not a valid UTF-16 pair`},
		{"lone surrogate in a key", `{"\ud800":1}`, `lone surrogate escape \ud800: not a valid UTF-16 pair`},
		{"lone surrogate in a deep key", `{"a":[[{"b":{"\udc00x":1}}]]}`, `lone surrogate escape \udc00: not a valid UTF-16 pair`},
		{"escaped backslash before u", `{"a":"\\ud800"}`, ""},
		{"UTF-8 of a surrogate", "{\"a\":\"\xed\xa0\x80\"}", "invalid UTF-8"},
		{"overlong UTF-8", "{\"a\":\"\xc0\xaf\"}", "invalid UTF-8"},
		{"invalid UTF-8 in a key", "{\"\xff\":1}", "invalid UTF-8"},
		{"BOM", "\xef\xbb\xbf{}", "invalid character 'ï' looking for beginning of value"},
		{"NaN", `{"a":NaN}`, "invalid character 'N' looking for beginning of value"},
		{"Infinity", `{"a":-Infinity}`, "invalid character 'I' in numeric literal"},
		{"leading zero", `{"a":01}`, "invalid character '1' after object key:value pair"},
		{"negative zero", `{"a":-0}`, "number -0 is a negative zero; send 0"},
		{"negative zero with a fraction", `{"a":[-0.000]}`, "number -0.000 is a negative zero; send 0"},
		{"negative zero with an exponent", `{"a":-0e5}`, "number -0e5 is a negative zero; send 0"},
		{"negative zero in a key's object", `{"a":{"b":-0.0E-1}}`, "number -0.0E-1 is a negative zero; send 0"},
		{"zero", `{"a":0,"b":0.0,"c":0e-5}`, ""},
		{"small negative", `{"a":-0.001,"b":-0e0}`, "number -0e0 is a negative zero; send 0"},
		// Numbers are bounded before anything does arithmetic on them.
		{"100-character number", `{"a":` + strings.Repeat("9", 100) + `}`, ""},
		{"exponent ±400", `{"a":1e400,"b":-1E-400}`, ""},
		{"101-character number", `{"a":` + strings.Repeat("9", 101) + `}`, "number 99999999999999999999…(101 characters) is longer than 100 characters"},
		{"4 MB number", `{"a":[` + strings.Repeat("9", 4<<20) + `]}`, "number 99999999999999999999…(4194304 characters) is longer than 100 characters"},
		{"tiny number", `{"a":1e-999999}`, "number 1e-999999 has an exponent beyond ±400"},
		{"huge number in a nested object", `{"a":{"b":[1,2,3.5E+401]}}`, "number 3.5E+401 has an exponent beyond ±400"},
		{"digits in a string are not a number", `{"a":"` + strings.Repeat("9", 1000) + `e-999999"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeArgs([]byte(tt.raw))
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.err != "" && (err == nil || err.Error() != tt.err):
				t.Fatalf("got %v, want %q", err, tt.err)
			}
		})
	}
}

// FuzzDecodeArgs: whatever DecodeArgs accepts has no repeated key and no
// nesting over the limit (the slow token walk agrees), so the value the
// gate checks is the only reading of the bytes the upstream receives.
func FuzzDecodeArgs(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":1,"a":2}`, `{"a":{"b":[{"c":"x:y\"","c":1}]}}`, `{"\u0061":1,"a":2}`, `[]`, `{"a":"\\"}`, `{"a":"\ud800"}`, `{"a":"\ud83d\ude00"}`, `{"a":-0.0e1}`, `{"a":1e-401}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := DecodeArgs(raw)
		if err != nil {
			return
		}
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		v, serr := canonjson.DecodeValue(d, maxArgDepth, false)
		if serr != nil {
			t.Fatalf("accepted %q, but the strict walk refuses it: %v", raw, serr)
		}
		if !reflect.DeepEqual(v, any(m)) {
			t.Fatalf("accepted %q as %v, the strict walk reads %v", raw, m, v)
		}
	})
}

// BenchmarkStrictDecodeArgs: what the strict decoder and the constraint
// checks cost for a typical call, for the costliest numbers still accepted
// (100 characters, exponent ±400) and for refused ones (a 4 MB number cost
// about 45 s of CPU before numbers were bounded, 1e-999999 about 24 ms).
func BenchmarkStrictDecodeArgs(b *testing.B) {
	p, diags := hclplan.Parse("b.hcl", []byte(`plan "p" {
  goal = "g"
  step "s" {
    tool = "t"
    arg "order_id" { eq = "4711" }
    arg "amount" {
      min = 1
      max = 30
    }
    arg "currency" { enum = ["EUR", 1e-400] }
  }
}
`))
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	step := p.Steps[0]
	args := func(amount string) []byte {
		return []byte(`{"order_id":"4711","amount":` + amount + `,"currency":"EUR"}`)
	}
	for _, tt := range []struct {
		name   string
		raw    []byte
		refuse bool
	}{
		{"typical", args("30"), false},
		{"worst accepted e-400", args("0." + strings.Repeat("0", 92) + "1e-400"), false},
		{"worst accepted e+400", args("9." + strings.Repeat("9", 94) + "e400"), false},
		{"worst accepted 100 digits", args("1." + strings.Repeat("3", 98)), false},
		{"refused 4 MB number", args("1." + strings.Repeat("3", 4<<20)), true},
		{"refused 1e-999999", args("1e-999999"), true},
		{"refused lone surrogate", []byte(`{"order_id":"4711\ud800","amount":1,"currency":"EUR"}`), true},
	} {
		b.Run(tt.name, func(b *testing.B) {
			b.SetBytes(int64(len(tt.raw)))
			for b.Loop() {
				m, err := DecodeArgs(tt.raw)
				if (err != nil) != tt.refuse {
					b.Fatalf("DecodeArgs: %v", err)
				}
				if err != nil {
					continue
				}
				_ = step.Check(m) // the gate's arithmetic on the number
				if _, err := canonjson.Marshal(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzBuildValue: whatever buildValue decodes, encoding/json's Decoder
// (UseNumber) decodes to the same value, with no key given twice.
func FuzzBuildValue(f *testing.F) {
	for _, s := range []string{
		`{"order_id":"4711","amount":20.50,"currency":"EUR","note":"a\u00e9\"b","tags":[1,-2e3,true,null,{}],"x":{"y":[]}}`,
		`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, ` [1, 2] `, `"s"`, `{"a":1}x`, `{"a":01}`, `{"a":-0.0e+0}`, `{"😀":"\ud83d\ude00"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !utf8.Valid(b) {
			return
		}
		if _, _, err := shape(b, false); err != nil {
			return
		}
		got, ok := buildValue(b)
		if !ok {
			return
		}
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var want any
		if err := d.Decode(&want); err != nil || d.More() {
			t.Fatalf("%q: built, but the decoder: %v (more: %v)", b, err, d.More())
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: built %#v, decoder %#v", b, got, want)
		}
		if n, _, _ := shape(b, false); countKeys(want) != n {
			t.Fatalf("%q: built although a key repeats", b)
		}
	})
}
