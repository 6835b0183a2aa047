package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planlock/planlock/proxy/ledger"
)

// observedAudit records calls with the real ledger, as observe mode does.
func observedAudit(t *testing.T, calls [][2]string) string {
	t.Helper()
	dir := t.TempDir()
	l, err := ledger.Open(context.Background(), ledger.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range calls {
		call := ledger.Call{PlanDigest: "sha256:" + strings.Repeat("a", 64), Tool: c[0], Args: json.RawMessage(c[1])}
		if err := l.Observe(context.Background(), call, ledger.WouldBlock, "observed"); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "audit.jsonl")
}

func suggestCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"planlock"}, args...), streams{in: strings.NewReader(""), out: &out, err: &errb})
	return code, out.String(), errb.String()
}

func TestPlanSuggestCommand(t *testing.T) {
	audit := observedAudit(t, [][2]string{
		{"get_order", `{"order_id":"4711"}`},
		{"refund_customer", `{"order_id":"4711","amount":12,"currency":"EUR"}`},
		{"refund_customer", `{"order_id":"4711","amount":30,"currency":"EUR"}`},
	})
	dir := t.TempDir()
	current := filepath.Join(dir, "refund.hcl")
	src, err := os.ReadFile("../../examples/refund/refund.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(current, src, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := suggestCLI("plan", "suggest", "--from-audit", audit, "--plan", current, "--margin", "100%")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	learned := filepath.Join(dir, "refund.suggested.hcl")
	for _, want := range []string{"wrote " + learned + " and " + filepath.Join(dir, "refund.suggested_test.hcl"), "learned from 3 calls"} {
		if !strings.Contains(errs, want) {
			t.Fatalf("stderr lacks %q: %s", want, errs)
		}
	}
	// The suggestion drops email and close, and allows two refunds: the
	// power diff says so.
	for _, want := range []string{"**More power**", "**Less power**", "send_email"} {
		if !strings.Contains(out, want) {
			t.Errorf("power diff lacks %q:\n%s", want, out)
		}
	}
	plan, err := os.ReadFile(learned)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`plan "refund-4711"`, "max_calls = 4", "# at most 2 calls in one run, plus a margin of 100%", "min = 12", "max = 30", `eq = "EUR"`} {
		if !strings.Contains(string(plan), want) {
			t.Errorf("suggested plan lacks %q:\n%s", want, plan)
		}
	}
	if code, out, errs := suggestCLI("plan", "validate", learned); code != 0 || errs != "" {
		t.Fatalf("plan validate: exit %d\n%s\n%s", code, out, errs)
	}
	if code, out, _ := suggestCLI("plan", "test", learned); code != 0 || !strings.Contains(out, "ok  \t"+learned) {
		t.Fatalf("plan test: exit %d\n%s", code, out)
	}

	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"never overwrites", []string{"--from-audit", audit, "--plan", current}, 1, "exists; it is never overwritten"},
		{"bad margin", []string{"--from-audit", audit, "--margin", "lots"}, 2, `--margin "lots"`},
		{"no audit", []string{"--name", "x"}, 2, "from-audit"},
		{"positional", []string{"--from-audit", audit, "x.hcl"}, 2, "unexpected argument"},
		{"bad pattern flag", []string{"--from-audit", audit, "--pattern", "nonsense"}, 2, "TOOL.ARG=REGEX"},
		{"missing log", []string{"--from-audit", filepath.Join(dir, "nothere.jsonl")}, 1, "no such file"},
		{"output not a plan name", []string{"--from-audit", audit, "--output", filepath.Join(dir, "x_test.hcl")}, 2, "--output"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errs := suggestCLI(append([]string{"plan", "suggest"}, tt.args...)...)
			if code != tt.code || !strings.Contains(errs, tt.want) {
				t.Fatalf("exit %d, want %d; stderr %q lacks %q", code, tt.code, errs, tt.want)
			}
		})
	}
	// A tampered log is refused.
	b, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "tampered.jsonl")
	if err := os.WriteFile(bad, bytes.Replace(b, []byte(`"amount":30`), []byte(`"amount":3000`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := suggestCLI("plan", "suggest", "--from-audit", bad, "--output", filepath.Join(dir, "t.hcl")); code != 1 || !strings.Contains(errs, "does not verify") {
		t.Fatalf("tampered: exit %d: %s", code, errs)
	}
}
