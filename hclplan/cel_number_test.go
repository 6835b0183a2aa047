package hclplan

import (
	"fmt"
	"strings"
	"testing"
)

// A CEL comparison of an argument decides as min/max does: numbers compare
// as exact decimals, never as rounded doubles. Each edge number is checked
// against a step bounded by min/max and against the same bounds written as
// CEL, in both operand orders, and the two decisions must agree.
func TestCELNumbersCompareAsMinMax(t *testing.T) {
	bounds := []struct{ lo, hi string }{
		{"0", "30"},
		{"0.1", "30.1"},
		{"-9007199254740993", "9007199254740993"},
		{"0", "9223372036854775807"},
		{"1e-300", "1e300"},
	}
	numbers := []string{
		"0", "30", "30.0", "3e1", "29.999", "30.5", "-0.0",
		"30.000000000000001", "30.0000000000000000000000001", "29.99999999999999999999",
		"0.1", "0.10000000000000001", "0.09999999999999999", "0.1000000000000000055511151231257827021181583404541015625",
		"30.1", "30.100000000000001", "30.10000000000000142108547152020037174224853515625",
		"9007199254740992", "9007199254740993", "9007199254740994", "-9007199254740993", "-9007199254740994",
		"9223372036854775807", "9223372036854775808", "18446744073709551616", "1e19",
		"123456789012345678901234567890", "1e300", "1.0000000000000001e300", "1e400", "-1e400", "1e-400", "-1e-400",
	}
	for _, b := range bounds {
		minmax := stepFrom(t, fmt.Sprintf("arg \"n\" {\n  min = %s\n  max = %s\n}", b.lo, b.hi))
		exprs := []string{
			fmt.Sprintf("self >= %s && self <= %s", celLit(b.lo), celLit(b.hi)),
			fmt.Sprintf("%s <= self && %s >= self", celLit(b.lo), celLit(b.hi)),
			fmt.Sprintf("!(self < %s) && !(%s < self)", celLit(b.lo), celLit(b.hi)),
		}
		for _, e := range exprs {
			cel := stepFrom(t, fmt.Sprintf("arg \"n\" {\n  any = true\n}\ncheck {\n  expr = %q\n}", strings.ReplaceAll(e, "self", "args.n")))
			for _, n := range numbers {
				args := fmt.Sprintf(`{"n": %s}`, n)
				want := minmax.Check(decode(t, args)) == nil
				got := cel.Check(decode(t, args)) == nil
				if got != want {
					t.Errorf("n = %s, bounds [%s, %s]: min/max allows=%v, CEL %q allows=%v", n, b.lo, b.hi, want, e, got)
				}
			}
		}
	}
}

// Equality and membership are exact as eq and enum are.
func TestCELNumberEqualityAsEq(t *testing.T) {
	tests := []struct {
		eq, n string
	}{
		{"30", "30.000000000000001"}, {"30", "30"}, {"30", "30.0"}, {"0.1", "0.10000000000000001"},
		{"0.1", "0.1"}, {"9007199254740993", "9007199254740992"}, {"9007199254740993", "9007199254740993"},
		{"1e300", "1e300"}, {"1e300", "1.0000000000000001e300"}, {"1e300", "1e400"}, {"9223372036854775807", "9223372036854775808"}, {"9223372036854775807", "9223372036854775807"},
	}
	for _, tt := range tests {
		eq := stepFrom(t, fmt.Sprintf("arg \"n\" { eq = %s }", tt.eq))
		args := fmt.Sprintf(`{"n": %s}`, tt.n)
		want := eq.Check(decode(t, args)) == nil
		for _, e := range []string{"args.n == %s", "%s == args.n", "!(args.n != %s)", "args.n in [%s]"} {
			e = fmt.Sprintf(e, celLit(tt.eq))
			cel := stepFrom(t, fmt.Sprintf("arg \"n\" {\n  any = true\n}\ncheck {\n  expr = %q\n}", e))
			if got := cel.Check(decode(t, args)) == nil; got != want {
				t.Errorf("n = %s: eq = %s allows=%v, CEL %q allows=%v", tt.n, tt.eq, want, e, got)
			}
		}
	}
}

// A double literal must be the number written: compared exactly, one CEL
// reads as another number would not mean what the plan says.
func TestCELInexactLiteralRefused(t *testing.T) {
	tests := []struct{ expr, want string }{
		{"self <= 0.10000000000000001", "CEL holds the literal 0.10000000000000001 as the double 0.1"},
		{"self >= 1.0e-400", "CEL holds the literal 1.0e-400 as the double 0"},
		{"self >= -1.0e-400", "CEL holds the literal -1.0e-400 as the double -0"},
		{"self < 9007199254740993.0", "CEL holds the literal 9007199254740993.0 as the double 9.007199254740992e+15"},
		{"[1, 2.50000000000000000001].exists(x, x == self)", "2.50000000000000000001"},
	}
	for _, tt := range tests {
		src := "plan \"p\" {\n  goal = \"g\"\n  step \"s\" {\n    tool = \"t\"\n    arg \"n\" { expr = \"" + tt.expr + "\" }\n  }\n}\n"
		_, diags := Parse("test.hcl", []byte(src))
		if !diags.HasErrors() || !strings.Contains(diags.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.expr, diags, tt.want)
		}
	}
	for _, ok := range []string{"self <= 0.1", "self <= 30.5", "self >= -2.5e-3", "self < 1e300", "self <= 30"} {
		stepFrom(t, "arg \"n\" { expr = \""+ok+"\" }")
	}
}

// celLit writes a plan number as a CEL literal of the same value: an
// integer that fits int64 as an int, anything else as a double literal.
func celLit(s string) string {
	if !strings.ContainsAny(s, ".eE") {
		return s
	}
	if !strings.Contains(s, ".") {
		return strings.Replace(strings.Replace(s, "e", ".0e", 1), "E", ".0e", 1)
	}
	return s
}
