package suggest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/proxy/ledger"
)

var update = flag.Bool("update", false, "rewrite golden files")

type obs struct{ run, tool, args string }

// recordAudit writes calls with the real ledger, as observe mode does, and
// returns the audit log's bytes.
func recordAudit(t testing.TB, calls []obs, redact bool) []byte {
	t.Helper()
	dir := t.TempDir()
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	l, err := ledger.Open(context.Background(), ledger.Options{Dir: dir, Redact: redact, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range calls {
		run := c.run
		if run == "" {
			run = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
		}
		if err := l.Observe(context.Background(), ledger.Call{PlanDigest: run, Tool: c.tool, Args: json.RawMessage(c.args)}, ledger.WouldAllow, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file:\n%s", name, got)
	}
}

const runB = "sha256:2222222222222222222222222222222222222222222222222222222222222222"

var goldenCases = []struct {
	name  string
	calls []obs
	opts  Options
}{
	{"refund", []obs{
		{"", "get_order", `{"order_id":"4711"}`},
		{"", "get_order", `{"order_id":"4711"}`},
		{"", "refund_customer", `{"order_id":"4711","amount":10,"currency":"EUR","note":"a"}`},
		{"", "refund_customer", `{"order_id":"4711","amount":25.5,"currency":"EUR"}`},
		{"", "refund_customer", `{"order_id":"4711","amount":30,"currency":"EUR","note":"bb"}`},
		{"", "send_email", `{"to":"c@example.com","body":"one"}`},
		{"", "send_email", `{"to":"c@example.com","body":"two"}`},
		{"", "send_email", `{"to":"c@example.com","body":"three"}`},
		{"", "send_email", `{"to":"c@example.com","body":"four"}`},
		{"", "send_email", `{"to":"c@example.com","body":"five"}`},
		{"", "send_email", `{"to":"c@example.com","body":"six, the longest"}`},
		{runB, "get_order", `{"order_id":"4711"}`},
		{runB, "refund_customer", `{"order_id":"4711","amount":5,"currency":"EUR"}`},
	}, Options{Name: "refund-4711", MarginPercent: 50, Source: "audit.jsonl"}},
	{"interleaved", []obs{
		{"", "list", `{"page":1}`},
		{"", "read", `{"id":"a"}`},
		{"", "list", `{"page":2}`},
		{"", "read", `{"id":"b","flag":true}`},
		{"", "read", `{"id":"c","flag":false}`},
	}, Options{Name: "browse", Source: "audit.jsonl"}},
	{"hinted", []obs{
		{"", "read", `{"path":"/srv/docs/a.md"}`},
		{"", "read", `{"path":"/srv/docs/b.md"}`},
		{"", "read", `{"path":"/srv/docs/c.md"}`},
		{"", "read", `{"path":"/srv/docs/d.md"}`},
		{"", "read", `{"path":"/srv/docs/e.md"}`},
		{"", "read", `{"path":"/srv/docs/guide/f.md"}`},
	}, Options{Name: "docs", Source: "audit.jsonl", Patterns: map[string]string{"read.path": `/srv/docs(/[^./][^/]*)+`}}},
	{"hostile", []obs{
		{"", "refund_customer", `{"note":"line one\nline two\r\n\"quoted\" \\ back ${var} %{ if x } */ # not a comment","amount":123456789012345678901234567890}`},
		{"", "refund_custοmer", `{"note":"look-alike tool (Greek omicron)","amount":-0.000001}`},
		{"", "refund_customer", `{"note":"line one\nline two\r\n\"quoted\" \\ back ${var} %{ if x } */ # not a comment","amount":123456789012345678901234567890}`},
		{"", "refund customer\n}\nstep \"evil\" {", `{"odd key\n\"x\"":{"nested":[1,"${x}",null,{"k":"v"}]}}`},
		{"", "huge", `{"blob":"` + strings.Repeat("A", 100000) + `","n":1}`},
		{"", "huge", `{"blob":"b","n":2}`},
		{"", "huge", `{"blob":"c","n":3}`},
		{"", "huge", `{"blob":"d","n":4}`},
		{"", "huge", `{"blob":"e","n":5}`},
		{"", "huge", `{"blob":"f","n":6}`},
	}, Options{Name: "hostile", Goal: "goal with \"quotes\" and ${interpolation}\nand a newline", Source: "audit\n.jsonl"}},
}

// TestSuggestGolden learns plans from audit logs recorded with the real
// ledger, hostile ones included, and checks the plans and tests byte for
// byte; each plan allows exactly what was observed (its tests prove it).
func TestSuggestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			calls, err := ReadAudit(recordAudit(t, tc.calls, false))
			if err != nil {
				t.Fatal(err)
			}
			tc.opts.Filename = tc.name + ".hcl"
			res, err := Suggest(calls, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name+".hcl", res.Plan)
			golden(t, tc.name+"_test.hcl", res.Tests)
			assertNoWider(t, res.Parsed, calls)
		})
	}
}

// assertNoWider checks the suggestion against what was seen: only observed
// tools, every observed call allowed by its tool's step, no any = true, and
// every bound an observed value.
func assertNoWider(t testing.TB, p *hclplan.Plan, calls []Call) {
	t.Helper()
	tools := map[string]bool{}
	for _, c := range calls {
		tools[c.Tool] = true
		steps := p.StepsForTool(c.Tool)
		if len(steps) != 1 {
			t.Fatalf("tool %q has %d steps", c.Tool, len(steps))
		}
		if err := steps[0].Check(c.Args); err != nil {
			t.Fatalf("observed call of %q is not allowed: %v", c.Tool, err)
		}
	}
	for _, s := range p.Steps {
		if !tools[s.Tool] {
			t.Fatalf("step %q allows tool %q, never observed", s.Name, s.Tool)
		}
		for _, a := range s.Args {
			if a.Any {
				t.Fatalf("step %q argument %q accepts any value", s.Name, a.Name)
			}
			seen := func(n *hclplan.Number) bool {
				for _, c := range calls {
					if c.Tool != s.Tool {
						continue
					}
					if v, ok := c.Args[a.Name].(json.Number); ok {
						if m, err := hclplan.ParseNumber(string(v)); err == nil && m.Cmp(*n) == 0 {
							return true
						}
					}
				}
				return false
			}
			if a.Min != nil && !seen(a.Min) || a.Max != nil && !seen(a.Max) {
				t.Fatalf("step %q argument %q: a bound that was never observed", s.Name, a.Name)
			}
		}
	}
}

func TestSuggestRefuses(t *testing.T) {
	good := recordAudit(t, []obs{{"", "a", `{"x":1}`}}, false)
	tampered := bytes.Replace(good, []byte(`"x":1`), []byte(`"x":2`), 1)
	for _, tt := range []struct {
		name string
		log  []byte
		opts Options
		want string
	}{
		{"redacted", recordAudit(t, []obs{{"", "a", `{"x":1}`}}, true), Options{}, "redacted"},
		{"tampered", tampered, Options{}, "does not verify"},
		{"empty", nil, Options{}, "no forwarded call"},
		{"hint that does not match", good, Options{Patterns: map[string]string{"a.x": "y"}}, "does not match an observed value"},
		{"hint for nothing observed", good, Options{Patterns: map[string]string{"b.x": "y"}}, `no observed call of tool "b"`},
		{"bad hint", good, Options{Patterns: map[string]string{"a.x": "("}}, "pattern hint"},
		{"number HCL cannot hold", recordAudit(t, []obs{{"", "a", `{"x":1e300}`}}, false), Options{}, "cannot be written exactly"},
		{"negative margin", good, Options{MarginPercent: -1}, "margin"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			calls, err := ReadAudit(tt.log)
			if err == nil {
				_, err = Suggest(calls, tt.opts)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}
