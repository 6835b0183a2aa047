package hclplan

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/planlock/planlock/internal/canonjson"
)

// stepFrom parses a one-step plan whose step body is body.
func stepFrom(t testing.TB, body string) *Step {
	t.Helper()
	src := "plan \"p\" {\n  goal = \"g\"\n  step \"s\" {\n    tool = \"t\"\n" + body + "\n  }\n}\n"
	p, diags := Parse("test.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatalf("parse: %s", diags.Error())
	}
	return p.Steps[0]
}

// decode reads arguments the way the proxy does: numbers stay exact.
func decode(t testing.TB, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return m
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		body string // arg blocks of the step
		args string // the call's arguments, JSON
		want string // "" = allowed; else a substring of the violation
	}{
		// No arguments declared: only calls without arguments.
		{"no args, none given", ``, `{}`, ""},
		{"no args, one given", ``, `{"x": 1}`, `argument "x" is not allowed by the plan`},

		// eq on every JSON type.
		{"eq string ok", `arg "a" { eq = "4711" }`, `{"a": "4711"}`, ""},
		{"eq string vs number", `arg "a" { eq = "4711" }`, `{"a": 4711}`, `argument "a" = 4711, want "4711"`},
		{"eq number vs string", `arg "a" { eq = 30 }`, `{"a": "30"}`, `= "30", want 30`},
		{"eq 30 equals 30.0", `arg "a" { eq = 30 }`, `{"a": 30.0}`, ""},
		{"eq 30 equals 3e1", `arg "a" { eq = 30 }`, `{"a": 3e1}`, ""},
		{"eq 30 not 30.000000000000000001", `arg "a" { eq = 30 }`, `{"a": 30.000000000000000001}`, "want 30"},
		{"eq bool", `arg "a" { eq = true }`, `{"a": true}`, ""},
		{"eq bool vs string", `arg "a" { eq = true }`, `{"a": "true"}`, "want true"},
		{"eq null", `arg "a" { eq = null }`, `{"a": null}`, ""},
		{"eq null vs missing is required", `arg "a" { eq = null }`, `{}`, `argument "a" is required`},
		{"eq object, key order irrelevant", `arg "a" { eq = { x = 1, y = "z" } }`, `{"a": {"y": "z", "x": 1.0}}`, ""},
		{"eq object extra key", `arg "a" { eq = { x = 1 } }`, `{"a": {"x": 1, "y": 2}}`, "want {\"x\":1}"},
		{"eq list", `arg "a" { eq = [1, "two", false] }`, `{"a": [1, "two", false]}`, ""},
		{"eq list order matters", `arg "a" { eq = [1, 2] }`, `{"a": [2, 1]}`, "want [1,2]"},
		{"eq smuggled JSON in string", `arg "a" { eq = "4711" }`, `{"a": "4711\", \"amount\": 300"}`, "want \"4711\""},

		// enum.
		{"enum hit", `arg "c" { enum = ["EUR", "USD"] }`, `{"c": "USD"}`, ""},
		{"enum miss", `arg "c" { enum = ["EUR"] }`, `{"c": "eur"}`, `= "eur", want one of ["EUR"]`},
		{"enum numbers", `arg "n" { enum = [1, 2.5] }`, `{"n": 2.50}`, ""},
		{"enum mixed miss", `arg "n" { enum = [1, "1"] }`, `{"n": true}`, "want one of"},

		// min / max, inclusive, exact.
		{"max inclusive", `arg "amount" { max = 30 }`, `{"amount": 30}`, ""},
		{"max above", `arg "amount" { max = 30 }`, `{"amount": 300}`, `argument "amount" = 300 is above the maximum 30`},
		{"max just above", `arg "amount" { max = 30 }`, `{"amount": 30.0000000000000000001}`, "above the maximum 30"},
		{"min inclusive", `arg "amount" { min = 1 }`, `{"amount": 1}`, ""},
		{"min below", `arg "amount" { min = 1 }`, `{"amount": 0.5}`, "is below the minimum 1"},
		{"negative below", `arg "amount" { min = 0 }`, `{"amount": -1e-300}`, "below the minimum 0"},
		{"huge number", `arg "amount" { max = 30 }`, `{"amount": 1e400}`, "above the maximum 30"},
		{"huge negative", `arg "amount" { min = 1 }`, `{"amount": -1e400}`, "below the minimum 1"},
		{"huge integer", `arg "amount" { max = 9007199254740993 }`, `{"amount": 9007199254740994}`, "above the maximum 9007199254740993"},
		{"huge integer equal", `arg "amount" { max = 9007199254740993 }`, `{"amount": 9007199254740993}`, ""},
		{"number as string fails min/max", `arg "amount" { max = 30 }`, `{"amount": "30"}`, `= "30", want a number`},
		{"bool fails min/max", `arg "amount" { min = 0 }`, `{"amount": true}`, "want a number"},
		{"fraction bounds", `arg "r" {
  min = 0.1
  max = 0.3
}`, `{"r": 0.30}`, ""},
		{"fraction above", `arg "r" { max = 0.3 }`, `{"r": 0.30000000000000004}`, "above the maximum 0.3"},

		// max_length: characters of a string, items of an array.
		{"length ascii ok", `arg "s" { max_length = 3 }`, `{"s": "abc"}`, ""},
		{"length ascii over", `arg "s" { max_length = 3 }`, `{"s": "abcd"}`, "has 4 characters, more than the maximum length 3"},
		{"length counts characters not bytes", `arg "s" { max_length = 3 }`, `{"s": "äöü"}`, ""},
		{"length emoji", `arg "s" { max_length = 1 }`, `{"s": "😀"}`, ""},
		{"length array", `arg "s" { max_length = 2 }`, `{"s": [1, 2, 3]}`, "has 3 items"},
		{"length number", `arg "s" { max_length = 2 }`, `{"s": 12}`, "want a string or an array"},
		{"length zero", `arg "s" { max_length = 0 }`, `{"s": ""}`, ""},

		// pattern: RE2, whole string.
		{"pattern full match", `arg "to" { pattern = "customer-[0-9]+@example\\.com" }`, `{"to": "customer-4711@example.com"}`, ""},
		{"pattern is anchored at the end", `arg "to" { pattern = "customer-[0-9]+@example\\.com" }`, `{"to": "customer-4711@example.com.evil.io"}`, "does not match the pattern"},
		{"pattern is anchored at the start", `arg "to" { pattern = "customer-[0-9]+@example\\.com" }`, `{"to": "x-customer-1@example.com"}`, "does not match"},
		{"pattern newline cannot end early", `arg "to" { pattern = "a" }`, `{"to": "a\n"}`, "does not match"},
		{"pattern alternation anchored as a whole", `arg "x" { pattern = "a|b" }`, `{"x": "ab"}`, "does not match"},
		{"pattern on number", `arg "x" { pattern = "[0-9]+" }`, `{"x": 42}`, "want a string"},

		// any, optional, required, undeclared.
		{"any accepts object", `arg "c" { any = true }`, `{"c": {"deep": [1, {"x": null}]}}`, ""},
		{"required missing", `arg "c" { any = true }`, `{}`, `argument "c" is required`},
		{"optional missing", `arg "c" {
  any      = true
  optional = true
}`, `{}`, ""},
		{"optional still checked", `arg "c" {
  max_length = 2
  optional   = true
}`, `{"c": "abc"}`, "more than the maximum length 2"},
		{"undeclared beside declared", `arg "a" { any = true }`, `{"a": 1, "b": 2}`, `argument "b" is not allowed by the plan`},
		{"undeclared reported before missing", `arg "a" { any = true }`, `{"b": 2}`, `argument "b" is not allowed`},
		{"look-alike name undeclared", `arg "amount" { max = 30 }`, `{"amоunt": 300}`, `argument "amоunt" is not allowed`},

		// Combinations: all must hold.
		{"combo ok", `arg "a" {
  min     = 1
  max     = 30
  enum    = [10, 20, 40]
}`, `{"a": 20}`, ""},
		{"combo enum ok but above max", `arg "a" {
  max  = 30
  enum = [10, 40]
}`, `{"a": 40}`, "above the maximum 30"},
		{"combo pattern and length", `arg "a" {
  pattern    = "[a-z]+"
  max_length = 3
}`, `{"a": "abcd"}`, "more than the maximum length 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := stepFrom(t, tt.body)
			err := s.Check(decode(t, tt.args))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Check(%s) = %v, want allowed", tt.args, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Check(%s) allowed, want violation %q", tt.args, tt.want)
			}
			var v *Violation
			if !errors.As(err, &v) || v.Step != "s" {
				t.Fatalf("Check error %T %v, want *Violation of step s", err, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check(%s) = %q, want it to contain %q", tt.args, err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("reason spans lines: %q", err)
			}
		})
	}
}

// Go values that did not come through UseNumber are checked the same way.
func TestCheckFloatAndIntArguments(t *testing.T) {
	s := stepFrom(t, `arg "amount" {
  min = 1
  max = 30
}`)
	for _, tc := range []struct {
		v    any
		okay bool
	}{{30.0, true}, {30, true}, {int64(31), false}, {0.99, false}, {float64(1), true}} {
		err := s.Check(map[string]any{"amount": tc.v})
		if (err == nil) != tc.okay {
			t.Errorf("Check(amount=%v (%T)) = %v, want allowed=%v", tc.v, tc.v, err, tc.okay)
		}
	}
}

func TestViolationNamesFirstBadArgumentStably(t *testing.T) {
	s := stepFrom(t, `arg "a" { max = 1 }
arg "b" { max = 1 }`)
	for i := 0; i < 20; i++ {
		err := s.Check(decode(t, `{"a": 5, "b": 5}`))
		if err == nil || !strings.Contains(err.Error(), `argument "a"`) {
			t.Fatalf("got %v, want the violation of argument a", err)
		}
	}
}

func TestDescribeCutsHugeValues(t *testing.T) {
	s := stepFrom(t, `arg "a" { eq = "x" }`)
	err := s.Check(map[string]any{"a": strings.Repeat("y", 1<<20)})
	if err == nil || len(err.Error()) > 200 {
		t.Fatalf("violation for a 1 MiB value is %d bytes long, want a short line", len(err.Error()))
	}
}

func TestNumberCmp(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"30", "30.0", 0},
		{"30", "3e1", 0},
		{"0.1", "0.10000000000000001", -1},
		{"1e400", "1e399", 1},
		{"-0", "0", 0},
		{"123456789012345678901234567890", "123456789012345678901234567891", -1},
		{"1E2", "100", 0},
		{"2.5e-3", "0.0025", 0},
	}
	for _, tt := range tests {
		if got := canonjson.MustNumber(tt.a).Cmp(canonjson.MustNumber(tt.b)); got != tt.want {
			t.Errorf("Cmp(%s, %s) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
	for _, bad := range []string{"NaN", "Inf", "+1", "01", "1.", ".5", "0x10", ""} {
		if _, err := ParseNumber(bad); err == nil {
			t.Errorf("ParseNumber(%q) accepted a non-JSON number", bad)
		}
	}
}

func TestCanonicalJSON(t *testing.T) {
	in := decode(t, `{"b": [1.0, {"y": 2, "x": "<&>"}], "a": 30.0}`)
	got, err := canonjson.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":30,"b":[1,{"x":"<&>","y":2}]}`
	if string(got) != want {
		t.Fatalf("CanonicalJSON = %s, want %s", got, want)
	}
}

func TestDescribeCutsHugeArraysWithoutCopyingThem(t *testing.T) {
	big := make([]any, 1<<20)
	for i := range big {
		big[i] = "item"
	}
	s := stepFrom(t, `arg "a" { eq = "x" }`)
	var err error
	allocs := testing.AllocsPerRun(3, func() { err = s.Check(map[string]any{"a": big}) })
	if err == nil || !strings.HasSuffix(err.Error(), "…, want \"x\"") {
		t.Fatalf("violation = %v", err)
	}
	// Rendering stops after a few hundred bytes: a handful of allocations,
	// not one per element.
	if allocs > 1000 {
		t.Fatalf("describing a 1M-item array took %.0f allocations", allocs)
	}
}
