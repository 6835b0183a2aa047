package hclplan

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
)

func TestParseExamples(t *testing.T) {
	files, err := filepath.Glob("../examples/*/*.hcl")
	if err != nil || len(files) < 3 {
		t.Fatalf("want at least 3 example plans, found %v (%v)", files, err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		parse := func(f string, src []byte) hcl.Diagnostics { _, d := Parse(f, src); return d }
		if strings.HasSuffix(f, "_test.hcl") { // a plan's tests, beside it
			parse = func(f string, src []byte) hcl.Diagnostics { _, d := ParseTests(f, src); return d }
		}
		if diags := parse(f, src); diags.HasErrors() {
			t.Errorf("%s: %s", f, diags.Error())
		}
	}
}

func TestParseRefund(t *testing.T) {
	src, err := os.ReadFile("../examples/refund/refund.hcl")
	if err != nil {
		t.Fatal(err)
	}
	p, diags := Parse("refund.hcl", src)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if p.Name != "refund-4711" || p.Order != OrderSequential || p.OnViolation != ViolationBlock {
		t.Errorf("plan header = %q %q %q", p.Name, p.Order, p.OnViolation)
	}
	if !p.Expires.IsZero() {
		t.Errorf("Expires = %v, want none (the example does not expire)", p.Expires)
	}
	if p.Digest != Digest(src) || !strings.HasPrefix(p.Digest, "sha256:") || len(p.Digest) != 71 {
		t.Errorf("Digest = %q", p.Digest)
	}
	var names []string
	for i, s := range p.Steps {
		if s.Index != i {
			t.Errorf("step %s has index %d, want %d", s.Name, s.Index, i)
		}
		names = append(names, s.Name+":"+s.Tool)
	}
	if got := strings.Join(names, ","); got != "lookup:get_order,refund:refund_customer,email:send_email,close:close_ticket" {
		t.Errorf("steps = %s", got)
	}
	refund := p.Step("refund")
	if refund.MaxCalls != 1 || refund.OnError != ErrorHold || refund.Pin == nil {
		t.Fatalf("refund step = %+v", refund)
	}
	if refund.Pin.Field != "hash" || refund.Pin.Eq.String() != `"9f86d081884c7d65"` || refund.Pin.Args.String() != `{"path":"f/support/refund_customer"}` {
		t.Errorf("pin = %+v", refund.Pin)
	}
	if a := refund.Arg("note"); a == nil || !a.Optional || *a.MaxLength != 200 {
		t.Errorf("note = %+v", a)
	}
	if p.Step("lookup").MaxCalls != 3 || p.Step("close").MaxCalls != 1 {
		t.Errorf("max_calls default or value wrong")
	}
	if p.Step("email").Approval != ApprovalEach || p.Step("lookup").Approval != ApprovalNone {
		t.Errorf("approval wrong")
	}
	if p.Upstream == nil || strings.Join(p.Upstream.Command, " ") != "./refund-server" || p.Upstream.Env[0] != "WINDMILL_TOKEN" {
		t.Errorf("upstream = %+v", p.Upstream)
	}
}

// plan wraps a plan body with a valid header, so each case shows only what
// it breaks. Line 3 is the first line of body.
func plan(body string) string {
	return "plan \"p\" {\n  goal = \"g\"\n" + body + "\n}\n"
}

const okStep = "  step \"s\" {\n    tool = \"t\"\n  }"

func TestParseDiagnostics(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // "line:col summary" of every error, in order
	}{
		{"syntax error", "plan \"p\" {\n  goal = \n}\n", []string{"2:10 Invalid expression"}},
		{"unclosed block", "plan \"p\" {\n  goal = \"g\"\n", []string{"1:10 Unclosed configuration block"}},
		{"no plan", "# nothing\n", []string{"1:1 No plan block"}},
		{"two plans", plan(okStep) + "plan \"q\" {\n  goal = \"g\"\n" + okStep + "\n}\n", []string{"7:1 More than one plan"}},
		{"unknown attribute", plan("  budget = 3\n" + okStep), []string{"3:3 Unsupported argument"}},
		{"unknown block", plan("  hook {}\n" + okStep), []string{"3:3 Unsupported block type"}},
		{"unknown arg attribute", plan("  step \"s\" {\n    tool = \"t\"\n    arg \"a\" { maximum = 3 }\n  }"), []string{"5:15 Unsupported argument"}},
		{"missing goal", "plan \"p\" {\n" + okStep + "\n}\n", []string{"1:10 Missing required argument"}},
		{"missing tool", plan("  step \"s\" {\n    max_calls = 2\n  }"), []string{"3:12 Missing required argument"}},
		{"no steps", plan(""), []string{"1:1 Plan has no steps"}},
		{"goal wrong type", "plan \"p\" {\n  goal = 3\n" + okStep + "\n}\n", []string{"2:10 Incorrect attribute value type"}},
		{"tool wrong type", plan("  step \"s\" {\n    tool = [\"t\"]\n  }"), []string{"4:12 Incorrect attribute value type"}},
		{"variables not allowed", plan("  step \"s\" {\n    tool = var.t\n  }"), []string{"4:12 Variables not allowed"}},
		{"functions not allowed", plan("  step \"s\" {\n    tool = upper(\"t\")\n  }"), []string{"4:12 Function calls not allowed"}},
		{"duplicate step", plan(okStep + "\n" + okStep), []string{"6:8 Duplicate step name"}},
		{"duplicate arg", plan("  step \"s\" {\n    tool = \"t\"\n    arg \"a\" { any = true }\n    arg \"a\" { any = true }\n  }"), []string{"6:9 Duplicate argument"}},
		{"min above max", plan("  step \"s\" {\n    tool = \"t\"\n    arg \"a\" {\n      min = 5\n      max = 1\n    }\n  }"), []string{"6:7 min is greater than max"}},
		{"min not a number", plan("  step \"s\" {\n    tool = \"t\"\n    arg \"a\" { min = \"1\" }\n  }"), []string{"5:21 Incorrect attribute value type"}},
		{"invalid regex", plan("  step \"s\" {\n    tool = \"t\"\n    arg \"a\" { pattern = \"a(\" }\n  }"), []string{"5:25 Invalid pattern"}},
		{"any with other", plan("  step \"s\" {\n    tool = \"t\"\n    arg \"a\" {\n      any = true\n      eq  = 1\n    }\n  }"), []string{"6:7 any combined with other constraints"}},
		{"no constraint", plan("  step \"s\" {\n    tool = \"t\"\n    arg \"a\" {}\n  }"), []string{"5:5 Argument has no constraint"}},
		{"any false alone", plan("  step \"s\" {\n    tool = \"t\"\n    arg \"a\" { any = false }\n  }"), []string{"5:15 Argument has no constraint"}},
		{"max_calls zero", plan("  step \"s\" {\n    tool = \"t\"\n    max_calls = 0\n  }"), []string{"5:17 Invalid max_calls"}},
		{"max_calls fraction", plan("  step \"s\" {\n    tool = \"t\"\n    max_calls = 1.5\n  }"), []string{"5:17 Invalid max_calls"}},
		{"expires not RFC 3339", plan("  expires = \"2026-12-31\"\n" + okStep), []string{"3:13 Invalid expires"}},
		{"upstream both", plan("  upstream {\n    command = [\"x\"]\n    url = \"http://127.0.0.1/mcp\"\n  }\n" + okStep), []string{"5:5 Upstream has both command and url"}},
		{"upstream neither", plan("  upstream {\n  }\n" + okStep), []string{"3:3 Upstream has neither command nor url"}},
		{"upstream bad url", plan("  upstream {\n    url = \"ftp://x\"\n  }\n" + okStep), []string{"4:11 Invalid upstream url"}},
		{"upstream env with url", plan("  upstream {\n    url = \"http://127.0.0.1/mcp\"\n    env = [\"A\"]\n  }\n" + okStep), []string{"5:5 env needs a stdio upstream"}},
		{"upstream env names planlock's token", plan("  upstream {\n    command = [\"x\"]\n    env = [\"A\", \"VAULT_TOKEN\"]\n  }\n" + okStep), []string{"5:17 planlock's own secret"}},
		{"upstream env names planlock's secrets", plan("  upstream {\n    command = [\"x\"]\n    env = [\"BAO_TOKEN\", \"GITHUB_TOKEN\", \"PLANLOCK_LISTEN_TOKEN\", \"ACTIONS_ID_TOKEN_REQUEST_URL\"]\n  }\n" + okStep),
			[]string{"5:12 planlock's own secret", "5:25 planlock's own secret", "5:41 planlock's own secret", "5:66 planlock's own secret"}},
		{"bad order", plan("  order = \"random\"\n" + okStep), []string{"3:11 Invalid order"}},
		{"bad on_violation", plan("  on_violation = \"warn\"\n" + okStep), []string{"3:18 Invalid on_violation"}},
		{"bad on_error", plan("  step \"s\" {\n    tool = \"t\"\n    on_error = \"retry\"\n  }"), []string{"5:16 Invalid on_error"}},
		{"bad approval", plan("  step \"s\" {\n    tool = \"t\"\n    approval = \"some\"\n  }"), []string{"5:16 Invalid approval"}},
		{"bad step name", plan("  step \"../x\" {\n    tool = \"t\"\n  }"), []string{"3:8 Invalid step name"}},
		{"empty enum", plan("  step \"s\" {\n    tool = \"t\"\n    arg \"a\" { enum = [] }\n  }"), []string{"5:22 Empty enum"}},
		{"pin missing eq", plan("  step \"s\" {\n    tool = \"t\"\n    pin {\n      tool = \"h\"\n      field = \"hash\"\n    }\n  }"), []string{"5:9 Missing required argument"}},
		{"pin args not object", plan("  step \"s\" {\n    tool = \"t\"\n    pin {\n      tool = \"h\"\n      args = [1]\n      field = \"hash\"\n      eq = \"x\"\n    }\n  }"), []string{"7:14 Invalid pin args"}},
		{"two pins", plan("  step \"s\" {\n    tool = \"t\"\n    pin {\n      tool = \"h\"\n      field = \"f\"\n      eq = 1\n    }\n    pin {\n      tool = \"h\"\n      field = \"f\"\n      eq = 1\n    }\n  }"), []string{"10:5 Duplicate pin block"}},
		{"several errors reported", plan("  order = \"x\"\n  step \"s\" {\n    tool = \"t\"\n    max_calls = 0\n    arg \"a\" { pattern = \"(\" }\n  }"),
			[]string{"3:11 Invalid order", "6:17 Invalid max_calls", "7:25 Invalid pattern"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, diags := Parse("test.hcl", []byte(tt.src))
			if p != nil {
				t.Fatalf("Parse returned a plan for an invalid file")
			}
			var got []string
			for _, d := range diags {
				if d.Severity != hcl.DiagError {
					continue
				}
				if d.Subject == nil {
					t.Fatalf("diagnostic %q has no source range", d.Summary)
				}
				if d.Subject.Filename != "test.hcl" {
					t.Errorf("diagnostic names file %q", d.Subject.Filename)
				}
				got = append(got, formatPos(d))
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("diagnostics:\n%s\nwant:\n%s\nsource:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"), tt.src)
			}
		})
	}
}

func formatPos(d *hcl.Diagnostic) string {
	return fmt.Sprintf("%d:%d %s", d.Subject.Start.Line, d.Subject.Start.Column, d.Summary)
}

func TestWarningsExpired(t *testing.T) {
	p, diags := Parse("x.hcl", []byte(plan("  expires = \"2020-01-01T00:00:00Z\"\n"+okStep)))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if !p.Expired(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)) || p.Expired(time.Date(2019, 12, 31, 23, 59, 59, 0, time.UTC)) {
		t.Error("Expired is wrong at the boundary")
	}
	w := p.Warnings(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if len(w) != 1 || w[0].Severity != hcl.DiagWarning || w[0].Subject.Start.Line != 3 {
		t.Fatalf("warnings = %v", w)
	}
	if w := p.Warnings(time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC)); len(w) != 0 {
		t.Fatalf("a plan that has not expired warns: %v", w)
	}
}

func TestPinLookup(t *testing.T) {
	p := &Pin{Field: "script.hash"}
	doc := map[string]any{"script": map[string]any{"hash": "abc"}}
	if v, ok := p.Lookup(doc); !ok || v != "abc" {
		t.Errorf("Lookup = %v %v", v, ok)
	}
	for _, bad := range []any{nil, "x", map[string]any{"script": "abc"}, map[string]any{}} {
		if _, ok := p.Lookup(bad); ok {
			t.Errorf("Lookup(%v) found a value", bad)
		}
	}
}

// TestExamplesDoNotExpireSoon keeps the committed examples usable: an
// example plan that expires within a year would stop loading for everyone
// who copies it.
func TestExamplesDoNotExpireSoon(t *testing.T) {
	limit := time.Now().AddDate(1, 0, 0)
	n := 0
	err := filepath.WalkDir("../examples", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".hcl" {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		p, _ := Parse(path, src)
		if p == nil {
			return nil // not a plan (TestParseExamples judges them)
		}
		n++
		if !p.Expires.IsZero() && p.Expires.Before(limit) {
			t.Errorf("%s: plan %q expires at %s, within a year: remove expires or set it later", path, p.Name, p.Expires.Format(time.RFC3339))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no example plans found")
	}
}

// TestDocPlansDoNotExpireSoon does for the plans the documentation shows
// (```hcl blocks of README.md and docs/*.md) what
// TestExamplesDoNotExpireSoon does for examples/: a reader copies them.
func TestDocPlansDoNotExpireSoon(t *testing.T) {
	limit := time.Now().AddDate(1, 0, 0)
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```hcl\n(.*?)```")
	n := 0
	for _, path := range append(docs, "../README.md") {
		md, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range block.FindAllSubmatch(md, -1) {
			if !strings.Contains(string(m[1]), "plan \"") {
				continue
			}
			p, _ := Parse(fmt.Sprintf("%s#%d", path, i), m[1])
			if p == nil || p.Name == "" {
				continue // a fragment, not a whole plan
			}
			n++
			if !p.Expires.IsZero() && p.Expires.Before(limit) {
				t.Errorf("%s: hcl block %d: plan %q expires at %s, within a year: remove expires or set it later", path, i, p.Name, p.Expires.Format(time.RFC3339))
			}
		}
	}
	if n == 0 {
		t.Fatal("no plans found in the documentation")
	}
}
