//go:build e2e

package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/planlock/planlock/internal/testkit/peers"
)

// auditRecords reads an audit log's records (type, decision, step, tool, reason).
func auditRecords(t *testing.T, path string) []map[string]any {
	t.Helper()
	return peers.AuditRecords(t, path)
}

// waitListed asks tools/list until the upstream's own list is served.
func waitListed(t *testing.T, c *rawClient, tool string) string {
	t.Helper()
	for range 100 {
		a := c.request("tools/list", `{}`)
		if strings.Contains(string(a.raw), `"`+tool+`"`) {
			return string(a.raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("tools/list never listed %q", tool)
	return ""
}

// TestObserveMode runs the real binary in observe mode: nothing is blocked,
// nothing counted, every would-be decision is audited, the audit log still
// verifies, and an enforcing proxy on the same state starts from zero.
func TestObserveMode(t *testing.T) {
	dir := t.TempDir()
	plan := writePlan(t, refundPlan)
	c := startRaw(t, "proxy", "--plan", plan, "--insecure-skip-verify", "--mode", "observe", "--state", dir, "--", refundBin)
	list := waitListed(t, c, "get_script_by_path") // unplanned, listed in observe mode only
	for _, tool := range []string{"get_order", "refund_customer", "send_email", "close_ticket"} {
		if !strings.Contains(list, `"`+tool+`"`) {
			t.Fatalf("tools/list lacks %s: %s", tool, list)
		}
	}
	calls := []struct {
		tool, args, want, reason string
	}{
		{"refund_customer", `{"order_id":"4711","amount":10,"currency":"EUR"}`, "would_block", "needs a successful call first"},
		{"get_order", `{"order_id":"4711"}`, "would_allow", ""},
		{"get_order", `{"order_id":"4711"}`, "would_allow", ""},
		{"get_order", `{"order_id":"4711"}`, "would_allow", ""},
		{"get_order", `{"order_id":"4711"}`, "would_block", "max_calls 3 used up"},
		{"get_order", `{"order_id":"4712"}`, "would_block", `argument "order_id"`},
		{"refund_customer", `{"order_id":"4711","amount":31,"currency":"EUR"}`, "would_block", `argument "amount"`},
		{"refund_customer", `{"order_id":"4711","amount":30,"currency":"EUR"}`, "would_allow", ""},
		{"send_email", `{"to":"customer-4711@example.com","body":"done"}`, "would_hold", "needs a human approval"},
		{"get_script_by_path", `{"path":"f/support/refund_customer"}`, "would_block", "is not in plan"},
	}
	for i, call := range calls {
		if a := c.call(call.tool, call.args); !a.allowed() {
			t.Fatalf("call %d %s was not forwarded in observe mode: %s", i, call.tool, a.text())
		}
	}
	c.stdin.Close()
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("proxy: %v", err)
	}
	if !strings.Contains(c.stderr.String(), "WARNING: observe mode") {
		t.Fatalf("no observe warning at start:\n%s", c.stderr.String())
	}
	audit := filepath.Join(dir, "audit.jsonl")
	var observed []map[string]any
	for _, r := range auditRecords(t, audit) {
		switch r["type"] {
		case "observe":
			observed = append(observed, r)
		case "decision", "lease", "outcome":
			t.Fatalf("observe mode wrote a %v record (counted or decided): %v", r["type"], r)
		}
	}
	if len(observed) != len(calls) {
		t.Fatalf("%d observe records, want %d", len(observed), len(calls))
	}
	for i, r := range observed {
		if r["decision"] != calls[i].want || r["tool"] != calls[i].tool || !strings.Contains(fmt.Sprint(r["reason"]), calls[i].reason) {
			t.Errorf("record %d: %v %v %q, want %s %s %q", i, r["decision"], r["tool"], r["reason"], calls[i].want, calls[i].tool, calls[i].reason)
		}
		if r["args"] == nil {
			t.Errorf("record %d has no arguments", i)
		}
	}
	if out, err := exec.Command(planlockBin, "audit", "verify", audit).CombinedOutput(); err != nil {
		t.Fatalf("audit verify: %v\n%s", err, out)
	}
	// The loop: suggest a plan from what was observed; it validates, its
	// generated tests pass, and the power diff against the plan is shown.
	out := filepath.Join(t.TempDir(), "learned.hcl")
	sug, err := exec.Command(planlockBin, "plan", "suggest", "--from-audit", audit, "--plan", plan, "--output", out, "--margin", "50%").CombinedOutput()
	if err != nil {
		t.Fatalf("plan suggest: %v\n%s", err, sug)
	}
	if !strings.Contains(string(sug), "What changes compared with the approved plan") || !strings.Contains(string(sug), "get_script_by_path") {
		t.Fatalf("plan suggest printed no power diff naming the new tool:\n%s", sug)
	}
	for _, args := range [][]string{{"plan", "validate", out}, {"plan", "test", out}} {
		if b, err := exec.Command(planlockBin, args...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, b)
		}
	}
	// Nothing was counted: enforcing on the same state allows all three lookups.
	e := startRaw(t, "proxy", "--plan", plan, "--insecure-skip-verify", "--state", dir, "--", refundBin)
	for i := range 3 {
		if a := e.call("get_order", `{"order_id":"4711"}`); !a.allowed() {
			t.Fatalf("enforce after observe: lookup %d: %s", i+1, a.text())
		}
	}
	if a := e.call("get_order", `{"order_id":"4711"}`); a.allowed() {
		t.Fatal("enforce after observe: a fourth lookup was forwarded")
	}
}

// TestObserveStep observes one step only: its refused calls are forwarded
// and audited, its allowed ones counted; other steps stay enforced.
func TestObserveStep(t *testing.T) {
	dir := t.TempDir()
	plan := writePlan(t, refundPlan)
	c := startRaw(t, "proxy", "--plan", plan, "--insecure-skip-verify", "--observe-step", "refund", "--audit-redact", "--state", dir, "--", refundBin)
	steps := []struct {
		tool, args string
		forwarded  bool
	}{
		{"get_order", `{"order_id":"4712"}`, false}, // lookup is enforced
		{"get_order", `{"order_id":"4711"}`, true},
		{"refund_customer", `{"order_id":"4711","amount":31,"currency":"EUR"}`, true}, // observed
		{"refund_customer", `{"order_id":"4711","amount":10,"currency":"EUR"}`, true}, // allowed, counted
		{"refund_customer", `{"order_id":"4711","amount":10,"currency":"EUR"}`, true}, // max_calls: observed
		{"delete_everything", `{}`, false},                                            // in no step: enforced
	}
	for i, s := range steps {
		if a := c.call(s.tool, s.args); a.allowed() != s.forwarded {
			t.Fatalf("call %d %s: forwarded %v, want %v: %s", i, s.tool, a.allowed(), s.forwarded, a.text())
		}
	}
	c.stdin.Close()
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("proxy: %v", err)
	}
	if !strings.Contains(c.stderr.String(), `WARNING: observing step(s) refund`) {
		t.Fatalf("no warning:\n%s", c.stderr.String())
	}
	var got []string
	for _, r := range auditRecords(t, filepath.Join(dir, "audit.jsonl")) {
		if r["type"] == "decision" || r["type"] == "observe" {
			got = append(got, fmt.Sprintf("%v:%v", r["decision"], r["step"]))
			if r["args"] != nil || r["args_sha256"] == nil {
				t.Errorf("redacted audit has arguments: %v", r)
			}
		}
	}
	want := []string{"block:lookup", "allow:lookup", "would_block:refund", "allow:refund", "would_block:refund", "block:<nil>"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("audit decisions %v, want %v", got, want)
	}
}

// TestObserveFlags: observe mode is the operator's, still needs a verified
// plan (or --insecure-skip-verify), and bad flags are usage errors.
func TestObserveFlags(t *testing.T) {
	plan := writePlan(t, refundPlan)
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"unsigned", []string{"--mode", "observe"}, "no trust policy for the plan"},
		{"bad mode", []string{"--mode", "watch", "--insecure-skip-verify"}, `--mode "watch": give enforce or observe`},
		{"unknown step", []string{"--observe-step", "nosuch", "--insecure-skip-verify"}, `--observe-step "nosuch": plan "refund-4711" has no such step`},
		{"both", []string{"--mode", "observe", "--observe-step", "refund", "--insecure-skip-verify"}, "--observe-step is for enforce mode"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"proxy", "--plan", plan, "--state", t.TempDir()}, tt.args...)
			out, err := exec.Command(planlockBin, append(args, "--", refundBin)...).CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), tt.want) {
				t.Fatalf("%v: %v\n%s", tt.args, err, out)
			}
		})
	}
}

// TestObserveConcurrentCount: 12 concurrent lookups under max_calls 3 are
// all forwarded, and exactly 3 are audited as would_allow, as an enforcing
// proxy would have forwarded exactly 3.
func TestObserveConcurrentCount(t *testing.T) {
	dir := t.TempDir()
	c := startRaw(t, "proxy", "--plan", writePlan(t, refundPlan), "--insecure-skip-verify", "--mode", "observe", "--state", dir, "--", refundBin)
	var chans []<-chan rpcAnswer
	for range 12 {
		id := c.nextID.Add(1)
		chans = append(chans, c.sendRaw(id, callLine(id, "get_order", `{"order_id":"4711"}`)))
	}
	for _, ch := range chans {
		if a := c.wait(ch); !a.allowed() {
			t.Fatalf("not forwarded: %s", a.text())
		}
	}
	c.stdin.Close()
	if err := c.cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	n := map[any]int{}
	for _, r := range auditRecords(t, filepath.Join(dir, "audit.jsonl")) {
		n[r["decision"]]++
	}
	if n["would_allow"] != 3 || n["would_block"] != 9 {
		t.Fatalf("decisions %v, want 3 would_allow and 9 would_block", n)
	}
}
