package hclplan

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FuzzParse: parsing and validating any input never panics, never hangs, and
// a plan that parses also formats, shows and re-parses to the same plan.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../examples/*/*.hcl")
	more, _ := filepath.Glob("testdata/fmt/*.in.hcl")
	for _, p := range append(files, more...) {
		src, _ := os.ReadFile(p)
		f.Add(src)
	}
	f.Add([]byte(plan(okStep)))
	f.Add([]byte("plan \"p\" { goal = \"g\" \n step \"s\" { tool = \"t\" \n arg \"a\" { pattern = \"(a+)+$\" } } }"))
	f.Fuzz(func(t *testing.T, src []byte) {
		p, diags := Parse("fuzz.hcl", src)
		if p == nil {
			if !diags.HasErrors() {
				t.Fatal("no plan and no error")
			}
			return
		}
		_ = Summary(p)
		j, err := JSON(p)
		if err != nil {
			t.Fatalf("JSON of a valid plan: %v", err)
		}
		out, fd := Format("fuzz.hcl", src)
		if fd.HasErrors() {
			t.Fatalf("a valid plan does not format: %s", fd.Error())
		}
		p2, d2 := Parse("fuzz.hcl", out)
		if d2.HasErrors() {
			t.Fatalf("formatting made a valid plan invalid: %s\n%s", d2.Error(), out)
		}
		j2, _ := JSON(p2)
		if !bytes.Equal(bytes.Replace(j, []byte(p.Digest), nil, 1), bytes.Replace(j2, []byte(p2.Digest), nil, 1)) {
			t.Fatalf("formatting changed the plan:\n%s\n%s", j, j2)
		}
	})
}

// FuzzFormat: fmt of fmt's output changes nothing.
func FuzzFormat(f *testing.F) {
	more, _ := filepath.Glob("testdata/fmt/*.in.hcl")
	for _, p := range more {
		src, _ := os.ReadFile(p)
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		out, diags := Format("fuzz.hcl", src)
		if diags.HasErrors() {
			return
		}
		again, d2 := Format("fuzz.hcl", out)
		if d2.HasErrors() {
			t.Fatalf("formatted output does not parse: %s\n%q", d2.Error(), out)
		}
		if !bytes.Equal(out, again) {
			t.Fatalf("not idempotent:\n%q\n%q", out, again)
		}
	})
}

// FuzzCheck: checking any JSON arguments against the steps of the example
// plans (flat, nested and CEL-checked arguments) never panics, and a
// violation is always one line naming the step.
func FuzzCheck(f *testing.F) {
	var steps []*Step
	for _, file := range []string{"../examples/refund/refund.hcl", "../examples/filesystem/edit-docs.hcl"} {
		src, _ := os.ReadFile(file)
		p, diags := Parse(filepath.Base(file), src)
		if diags.HasErrors() {
			f.Fatal(diags.Error())
		}
		steps = append(steps, p.Steps...)
	}
	for _, s := range []string{
		`{"order_id": "4711", "amount": 30, "currency": "EUR"}`,
		`{"order_id": "4711", "amount": 1e400, "currency": "EUR", "note": "x"}`,
		`{"order_id": 4711, "amount": "30"}`,
		`{"to": "customer-4711@example.com", "body": "hi"}`,
		`{"a": [[[[{}]]]]}`,
		`{"paths": ["/srv/docs/a.md", "/srv/docs/../x"]}`,
		`{"path": "/srv/docs/a.md", "edits": [{"oldText": "a", "newText": "a"}], "dryRun": true}`,
		`{"path": "/srv/docs/a.md", "edits": [{"oldText": "a", "newText": "b", "x": [1]}, 3, null]}`,
	} {
		for i := range steps {
			f.Add(i, s)
		}
	}
	f.Fuzz(func(t *testing.T, step int, args string) {
		if step < 0 || step >= len(steps) {
			return
		}
		dec := json.NewDecoder(strings.NewReader(args))
		dec.UseNumber()
		var m map[string]any
		if dec.Decode(&m) != nil {
			return
		}
		s := steps[step]
		err := s.Check(m)
		if err == nil {
			return
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "step \""+s.Name+"\"") || strings.Contains(msg, "\n") {
			t.Fatalf("bad violation message %q", msg)
		}
	})
}

// FuzzCEL: any expression either fails to validate with a diagnostic or is
// evaluated on any arguments without panic, within the cost limit (an
// expensive one is refused at validate or stopped at run time), and gives a
// one-line reason.
func FuzzCEL(f *testing.F) {
	for _, seed := range [][2]string{
		{"args.amount <= 30 || args.currency == 'EUR'", `{"amount": 30.5, "currency": "USD"}`},
		{"args.l.all(x, args.l.all(y, x == y))", `{"l": [1, 2, 3]}`},
		{"args.s.matches('^(a+)+$')", `{"s": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"}`},
		{"size(args.l) < 3 && args.l[5] == 1", `{"l": [1]}`},
		{"lists.range(1000000).size() > 0", `{}`},
		{"args.s.split('').size() > 1", `{"s": "abc"}`},
		{"args", `{}`},
		{"1/0 == 1", `{}`},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, expr, args string) {
		quoted := strings.NewReplacer("${", "$${", "%{", "%%{").Replace(strconv.Quote(expr))
		src := "plan \"p\" {\n  goal = \"g\"\n  step \"s\" {\n    tool = \"t\"\n    arg \"l\" {\n      any      = true\n      optional = true\n    }\n    arg \"s\" {\n      any      = true\n      optional = true\n    }\n    arg \"amount\" {\n      any      = true\n      optional = true\n    }\n    arg \"currency\" {\n      any      = true\n      optional = true\n    }\n    check { expr = " + quoted + " }\n  }\n}\n"
		p, diags := Parse("fuzz.hcl", []byte(src))
		if p == nil {
			if !diags.HasErrors() {
				t.Fatal("no plan and no error")
			}
			return
		}
		dec := json.NewDecoder(strings.NewReader(args))
		dec.UseNumber()
		var m map[string]any
		if dec.Decode(&m) != nil {
			return
		}
		if err := p.Steps[0].Check(m); err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("reason is not one line: %q", err.Error())
		}
	})
}
