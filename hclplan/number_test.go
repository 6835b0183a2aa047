package hclplan

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/planlock/planlock/internal/canonjson"
)

// long is a valid JSON number of n characters.
func long(n int) string { return strings.Repeat("7", n) }

func TestCheckNumber(t *testing.T) {
	tests := []struct {
		num, err string // err "" = accepted
	}{
		{"30", ""},
		{"-0.5e-3", ""},
		{long(100), ""},
		{"1e400", ""},
		{"1e-400", ""},
		{"1E+400", ""},
		{"1e0000000400", ""},
		{"1." + long(93) + "e-400", ""},
		{long(101), "number 77777777777777777777…(101 characters) is longer than 100 characters"},
		{long(4 << 20), "number 77777777777777777777…(4194304 characters) is longer than 100 characters"},
		{"1e401", "number 1e401 has an exponent beyond ±400"},
		{"1e-401", "number 1e-401 has an exponent beyond ±400"},
		{"1e-999999", "number 1e-999999 has an exponent beyond ±400"},
		{"1e99999999999999999999999999999999", "number 1e99999999999999999999999999999999 has an exponent beyond ±400"},
	}
	for _, tt := range tests {
		t.Run(tt.num[:min(len(tt.num), 30)], func(t *testing.T) {
			for _, err := range []error{CheckNumber(tt.num), CheckNumber([]byte(tt.num))} {
				switch {
				case tt.err == "" && err != nil:
					t.Fatalf("refused: %v", err)
				case tt.err != "" && (err == nil || err.Error() != tt.err):
					t.Fatalf("got %v, want %q", err, tt.err)
				}
			}
		})
	}
}

// TestOutOfBoundNumbersAreRefusedEverywhere: every place that turns a JSON
// number into exact arithmetic refuses an out-of-bound number with the
// reason, instead of spending seconds of CPU on it (a 4 MB number took about
// 45 s in big.Rat, 1e-999999 about 24 ms).
func TestOutOfBoundNumbersAreRefusedEverywhere(t *testing.T) {
	step := stepFrom(t, `arg "n" {
  min = 1
  max = 30
}
arg "e" { eq = 5 }
arg "l" { enum = [1, [2]] }`)
	for _, num := range []string{long(4 << 20), "1e-999999", "1e401", "-1e-401"} {
		t.Run(num[:min(len(num), 12)], func(t *testing.T) {
			want := CheckNumber(num)
			if want == nil {
				t.Fatal("CheckNumber accepts it")
			}
			n := json.Number(num)
			if _, err := ParseNumber(num); err == nil || err.Error() != want.Error() {
				t.Errorf("ParseNumber: %v", err)
			}
			if _, err := canonjson.Marshal(map[string]any{"a": []any{n}}); err == nil || err.Error() != want.Error() {
				t.Errorf("CanonicalJSON: %v", err)
			}
			if canonjson.MustNumber("5").Cmp(canonjson.MustNumber("5")) != 0 || (Value{v: json.Number("5")}).Equal(n) {
				t.Errorf("Equal: an out-of-bound number equals 5")
			}
			for _, arg := range []string{"n", "e", "l"} {
				err := step.Check(map[string]any{"n": json.Number("5"), "e": json.Number("5"), "l": json.Number("1"), arg: n})
				if err == nil || !strings.Contains(err.Error(), want.Error()) || len(err.Error()) > 200 {
					t.Errorf("Check %s: %v", arg, err)
				}
			}
		})
	}
}

// TestOutOfBoundPlanNumbers: a plan constant beyond the bounds is a
// validation error at its position, found quickly (1e-999999 did not finish
// in two minutes).
func TestOutOfBoundPlanNumbers(t *testing.T) {
	tests := []struct{ name, attr, want string }{
		{"tiny max", `max = 1e-999999`, "5:21 Invalid number"},
		{"huge min", `min = 1e999999`, "5:21 Invalid number"},
		{"long eq", `eq = ` + long(101), "5:20 Invalid value"},
		{"long max", `max = ` + long(101), "5:21 Invalid number"},
		{"tiny enum member", `enum = [1, 1e-401]`, "5:22 Invalid value"},
		{"huge in a list", `eq = [{ a = 1e999999 }]`, "5:20 Invalid value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := plan("  step \"s\" {\n    tool = \"t\"\n    arg \"a\" { " + tt.attr + " }\n  }")
			p, diags := Parse("test.hcl", []byte(src))
			if p != nil || len(diags) != 1 {
				t.Fatalf("got %v", diags)
			}
			if got := formatPos(diags[0]); got != tt.want {
				t.Fatalf("got %s (%s), want %s", got, diags[0].Detail, tt.want)
			}
			if !strings.Contains(diags[0].Detail, "beyond ±400") && !strings.Contains(diags[0].Detail, "longer than 100 characters") {
				t.Fatalf("detail %q does not say why", diags[0].Detail)
			}
		})
	}
	// In bounds, large plan constants keep their exact value.
	s := stepFrom(t, "arg \"a\" {\n  min = 1e-400\n  max = 1e300\n}")
	if got := s.Args[0].Max.String(); got != "1e+300" {
		t.Errorf("max = %s, want 1e+300", got)
	}
	if err := s.Check(map[string]any{"a": json.Number("1e300")}); err != nil {
		t.Errorf("1e300 <= max 1e300: %v", err)
	}
	if err := s.Check(map[string]any{"a": json.Number("1.0000000000000000000001e300")}); err == nil {
		t.Errorf("above max 1e300 accepted")
	}
}

// BenchmarkWorstAcceptedNumber: the costliest numbers still accepted (100
// characters, exponent ±400) parse and compare in microseconds.
func BenchmarkWorstAcceptedNumber(b *testing.B) {
	for _, tt := range []struct{ name, num string }{
		{"100 digits e-400", "0." + strings.Repeat("0", 92) + "1e-400"},
		{"100 digits e+400", "9." + strings.Repeat("9", 94) + "e400"},
		{"100-digit integer", strings.Repeat("9", 100)},
	} {
		if len(tt.num) != 100 || CheckNumber(tt.num) != nil {
			b.Fatalf("%s: %d characters, %v", tt.name, len(tt.num), CheckNumber(tt.num))
		}
		max := canonjson.MustNumber("30")
		b.Run(tt.name, func(b *testing.B) {
			for b.Loop() {
				n, err := ParseNumber(tt.num)
				if err != nil {
					b.Fatal(err)
				}
				_ = n.Cmp(max)
				_ = n.Canonical()
			}
		})
	}
}

// BenchmarkRefusedNumber: refusing a 4 MB number costs one look at its length.
func BenchmarkRefusedNumber(b *testing.B) {
	for _, tt := range []struct{ name, num string }{{"4 MB", long(4 << 20)}, {"1e-999999", "1e-999999"}} {
		b.Run(tt.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := ParseNumber(tt.num); err == nil {
					b.Fatal("accepted")
				}
			}
		})
	}
}
