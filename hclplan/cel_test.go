package hclplan

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

func TestCheckCEL(t *testing.T) {
	const amount = `arg "amount" { any = true }
arg "currency" {
  enum     = ["EUR", "USD"]
  optional = true
}
check {
  expr    = "args.amount <= 30 || args.currency == 'EUR'"
  message = "above 30 only in EUR"
}`
	const paths = `arg "paths" {
  max_items = 5
  items { pattern = "/srv/docs/.+" }
  expr    = "self.all(p, !p.contains('..'))"
  message = "paths must stay inside /srv/docs"
}`
	tests := []struct {
		name, body, args, want string
	}{
		{"int 30 passes", amount, `{"amount": 30, "currency": "USD"}`, ""},
		{"30.0 is the int 30", amount, `{"amount": 30.0, "currency": "USD"}`, ""},
		{"3e1 is the int 30", amount, `{"amount": 3e1, "currency": "USD"}`, ""},
		{"30.5 is a double above 30", amount, `{"amount": 30.5, "currency": "USD"}`, `step "s": check failed: above 30 only in EUR`},
		{"29.999 passes", amount, `{"amount": 29.999, "currency": "USD"}`, ""},
		{"huge integer becomes a double", amount, `{"amount": 123456789012345678901234567890, "currency": "USD"}`, `step "s": check failed: above 30 only in EUR`},
		{"beyond double's range compares exactly", amount, `{"amount": 1e400, "currency": "USD"}`, `step "s": check failed: above 30 only in EUR`},
		{"arithmetic beyond double's range refuses", `arg "n" { expr = "self * 1.0 > 0.0" }`, `{"n": 1e400}`, `could not be evaluated, so the call is refused: number 1e400 is beyond the range of double`},
		{"int() beyond double's range refuses", `arg "n" { expr = "int(self) > 0" }`, `{"n": -1e400}`, `could not be evaluated, so the call is refused: number -1e400 is beyond the range of double`},
		{"arithmetic on an inexact number uses the nearest double", `arg "n" { expr = "double(self) * 2.0 == 60.0" }`, `{"n": 30.000000000000001}`, ""},
		{"literal-first arithmetic on an inexact number refuses", `arg "n" { expr = "2.0 * self > 0.0" }`, `{"n": 30.000000000000001}`, `could not be evaluated, so the call is refused`},
		{"string() of an inexact number is its text", `arg "n" { expr = "string(self) == '30.000000000000001'" }`, `{"n": 30.000000000000001}`, ""},
		{"type of an inexact number is double", `arg "n" { expr = "type(self) == double" }`, `{"n": 30.000000000000001}`, ""},
		{"other branch", amount, `{"amount": 300, "currency": "EUR"}`, ""},
		{"missing optional key is an evaluation error: fail closed", amount, `{"amount": 300}`, `step "s": check "args.amount <= 30 || args.currency == 'EUR'" could not be evaluated, so the call is refused: no such key: currency`},
		{"string amount: no overload, refused", amount, `{"amount": "3", "currency": "USD"}`, `could not be evaluated, so the call is refused: no such overload`},
		{"arg constraints run before checks", amount, `{"amount": 1, "currency": "GBP"}`, `step "s": argument "currency" = "GBP", want one of ["EUR", "USD"]`},
		{"self expr ok", paths, `{"paths": ["/srv/docs/a.md"]}`, ""},
		{"self expr message", paths, `{"paths": ["/srv/docs/a.md", "/srv/docs/../etc/passwd"]}`, `step "s": argument "paths" fails its check: paths must stay inside /srv/docs`},
		{"items checked before expr", paths, `{"paths": ["/etc/passwd"]}`, `step "s": argument "paths"[0] = "/etc/passwd" does not match the pattern "/srv/docs/.+"`},
		{"expr without message quotes the expression", `arg "n" { expr = "self % 2 == 0" }`, `{"n": 3}`, `step "s": argument "n" fails its check "self % 2 == 0"`},
		{"expr on a field", `arg "o" {
  field "to" { expr = "self.endsWith('@example.com')" }
}`, `{"o": {"to": "x@evil.com"}}`, `step "s": argument "o".to fails its check "self.endsWith('@example.com')"`},
		{"expr on items", `arg "l" {
  max_items = 3
  items { expr = "size(self) < 3" }
}`, `{"l": ["a", "bcd"]}`, `step "s": argument "l"[1] fails its check "size(self) < 3"`},
		{"dyn result that is not a bool refuses", `arg "x" { expr = "self[0]" }`, `{"x": ["yes"]}`, `step "s": argument "x" check "self[0]" gave string, not true or false, so the call is refused`},
		{"dyn result true passes", `arg "x" { expr = "self[0]" }`, `{"x": [true]}`, ""},
		{"string helpers", `arg "x" { expr = "self.lowerAscii().split('/').size() <= 3" }`, `{"x": "A/B/C/D"}`, `fails its check`},
		{"regex matches", `arg "x" { expr = "self.matches('^[a-z]+$')" }`, `{"x": "abc"}`, ""},
		{"list helpers", `arg "x" {
  max_items = 10
  expr      = "self.distinct().size() == self.size()"
}`, `{"x": [1, 2, 1]}`, `fails its check`},
		{"several checks, first failing decides", `arg "a" { any = true }
check {
  expr    = "args.a > 0"
  message = "positive"
}
check {
  expr    = "args.a < 10"
  message = "small"
}`, `{"a": 10}`, `step "s": check failed: small`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := stepFrom(t, tt.body)
			err := s.Check(decode(t, tt.args))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Fatalf("Check(%s)\n got: %s\nwant: %s", tt.args, got, tt.want)
			}
			if strings.Contains(got, "\n") {
				t.Fatalf("reason is not one line: %q", got)
			}
		})
	}
}

// Values decoded without UseNumber (float64) get the same CEL types.
func TestCheckCELFloatArguments(t *testing.T) {
	s := stepFrom(t, "arg \"n\" {\n  expr = \"self == 30 && type(self) == int\"\n}")
	var m map[string]any
	if err := json.Unmarshal([]byte(`{"n": 30.0}`), &m); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(m); err != nil {
		t.Fatal(err)
	}
}

// A value far larger than the size the estimate assumed is refused before
// the evaluation starts: the runtime cost limit is never the only bound.
func TestCheckCELRuntimeCostLimit(t *testing.T) {
	s := stepFrom(t, `arg "l" { expr = "self.all(x, x > 0)" }`)
	big := make([]any, 2_000_000)
	for i := range big {
		big[i] = json.Number("1")
	}
	err := s.Check(map[string]any{"l": big})
	if err == nil || !strings.Contains(err.Error(), "has 2000000 items, more than the 1000 an expression may read") {
		t.Fatalf("Check = %v, want the input bound", err)
	}
	if err := s.Check(map[string]any{"l": big[:10]}); err != nil {
		t.Fatalf("small list: %v", err)
	}
}

func TestParseCELDiagnostics(t *testing.T) {
	step := func(body string) string {
		return plan("  step \"s\" {\n    tool = \"t\"\n" + body + "\n  }")
	}
	tests := []struct {
		name string
		src  string
		want []string // "line:col summary"
		why  string   // a substring of the first detail
	}{
		{"syntax error placed in the string", step(`    arg "a" { expr = "self.size() > " }`), []string{"5:37 Invalid expression"}, "Syntax error"},
		{"place counts escapes", step(`    arg "a" { expr = "self == \"x\" && nope(1)" }`), []string{"5:44 Invalid expression"}, "undeclared reference to 'nope'"},
		{"place in a heredoc", step("    arg \"a\" {\n      expr = <<-EOT\n        self.size() > 1 &&\n          self.missing_fn()\n      EOT\n    }"), []string{"8:26 Invalid expression"}, "undeclared reference to 'missing_fn'"},
		{"type error", step(`    arg "a" { expr = "1 + 'a' == 2" }`), []string{"5:25 Invalid expression"}, "no matching overload"},
		{"args is not defined in an arg's expr", step(`    arg "a" { expr = "args.x == 1" }`), []string{"5:23 Invalid expression"}, "undeclared reference to 'args'"},
		{"self is not defined in a check", step("    arg \"a\" { any = true }\n    check { expr = \"self == 1\" }"), []string{"6:21 Invalid expression"}, "undeclared reference to 'self'"},
		{"no clock", step(`    arg "a" { expr = "now() > 1" }`), []string{"5:26 Invalid expression"}, "undeclared reference to 'now'"},
		{"not a bool", step(`    arg "a" { expr = "self + 1" }`), []string{"5:22 Expression is not a condition"}, "type is int"},
		{"too expensive", step(`    arg "a" { expr = "self.exists(p, self.exists(q, p == q))" }`), []string{"5:22 Expression too expensive"}, "max_items"},
		{"bounded by max_items passes the estimate, the cost of the other one fails", step("    arg \"a\" {\n      max_items = 10\n      expr = \"self.exists(p, self.exists(q, p == q))\"\n    }\n    arg \"b\" { expr = \"self.exists(p, self.exists(q, p == q))\" }"), []string{"9:22 Expression too expensive"}, ""},
		{"empty expr", step(`    arg "a" { expr = " " }`), []string{"5:22 Empty expression"}, ""},
		{"multi-line message", step("    arg \"a\" {\n      expr = \"true\"\n      message = \"a\\nb\"\n    }"), []string{"7:17 Invalid message"}, ""},
		{"check needs expr", step("    check { message = \"m\" }"), []string{"5:13 Missing required argument"}, ""},
		{"expr not a string", step(`    arg "a" { expr = true }`), []string{"5:22 Incorrect attribute value type"}, ""},
		{"too long", step(`    arg "a" { expr = "` + strings.Repeat("1 == 1 && ", 500) + `true" }`), []string{"5:22 Expression too long"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, diags := Parse("test.hcl", []byte(tt.src))
			if p != nil {
				t.Fatalf("Parse returned a plan for an invalid file")
			}
			var got []string
			var first *hcl.Diagnostic
			for _, d := range diags {
				if d.Severity == hcl.DiagError {
					got = append(got, formatPos(d))
					if first == nil {
						first = d
					}
				}
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("diagnostics:\n%s\nwant:\n%s\nsource:\n%s\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"), tt.src, diags.Error())
			}
			if !strings.Contains(first.Detail, tt.why) {
				t.Fatalf("detail %q does not say %q", first.Detail, tt.why)
			}
		})
	}
}

// fmt lays out expressions' attributes but never changes an expression: the
// formatted plan has the same canonical JSON, expressions byte for byte.
func TestFormatKeepsExpressions(t *testing.T) {
	in, err := os.ReadFile("testdata/fmt/cel.in.hcl")
	if err != nil {
		t.Fatal(err)
	}
	out, diags := Format("cel.hcl", in)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	pIn, d1 := Parse("cel.hcl", in)
	pOut, d2 := Parse("cel.hcl", out)
	if d1.HasErrors() || d2.HasErrors() {
		t.Fatal(d1, d2)
	}
	jIn, _ := JSON(pIn)
	jOut, _ := JSON(pOut)
	strip := func(j []byte, digest string) string { return strings.Replace(string(j), digest, "", 1) }
	if strip(jIn, pIn.Digest) != strip(jOut, pOut.Digest) {
		t.Fatalf("fmt changed the plan:\n%s\n%s", jIn, jOut)
	}
	want := "!self.contains('..')  &&  self != \"\""
	if got := pOut.Steps[0].Args[1].Items.Fields[0].Expr.Source; got != want {
		t.Fatalf("expression = %q, want %q", got, want)
	}
	if got := pOut.Steps[0].Checks[0].Source; got != "args.edits.all(e,\n  e.oldText != e.newText)\n" {
		t.Fatalf("heredoc expression = %q", got)
	}
	if !strings.Contains(string(jOut), `"expr": "!self.contains('..')  &&  self != \"\""`) {
		t.Fatalf("canonical JSON does not hold the expression byte for byte:\n%s", jOut)
	}
}

// A plan is shared by every call: its compiled expressions evaluate
// concurrently without data races (run with -race).
func TestCheckCELConcurrent(t *testing.T) {
	s := stepFrom(t, `arg "paths" {
  max_items = 5
  items { max_length = 100 }
  expr    = "self.all(p, p.startsWith('/srv/'))"
  message = "inside /srv"
}
check { expr = "size(args.paths) > 0" }`)
	ok := decode(t, `{"paths": ["/srv/a", "/srv/b"]}`)
	bad := decode(t, `{"paths": ["/etc/a"]}`)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if err := s.Check(ok); err != nil {
					errs <- err
					return
				}
				if err := s.Check(bad); err == nil || !strings.Contains(err.Error(), "inside /srv") {
					errs <- fmt.Errorf("goroutine %d: bad call got %v", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
