//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/planlock/planlock/hclplan"
)

// The planlock commands that read an upstream, run as a user runs them.

func TestToolsCommand(t *testing.T) {
	out, err := exec.Command(planlockBin, "tools", "--", refundBin).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"refund_customer  Refund an amount of an order to the customer's payment method.\n    amount: number, required\n    currency: string, required\n    note: string, optional\n    order_id: string, required\n",
		"get_order  Look up an order",
	} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("tools output lacks %q:\n%s", want, out)
		}
	}
	raw, err := exec.Command(planlockBin, "tools", "--json", "--", refundBin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var r struct{ Tools []json.RawMessage }
	if err := json.Unmarshal(raw, &r); err != nil || len(r.Tools) != 5 {
		t.Fatalf("--json: %v, %d tools\n%s", err, len(r.Tools), raw)
	}
	// The --json output is what plan validate --tools reads.
	toolsFile := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(toolsFile, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	plan := writePlan(t, refundPlan)
	if out, err := exec.Command(planlockBin, "plan", "validate", "--tools", toolsFile, plan).CombinedOutput(); err != nil {
		t.Fatalf("plan validate --tools: %v\n%s", err, out)
	}
	// A dead upstream is a clear failure (exit 1), its cause first.
	cmd := exec.Command(planlockBin, "tools", "--", testUpstreamBin, "--mode", "exit-at-start")
	out, err = cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), `planlock: the upstream exited at start with exit status 3; its last stderr line: "testupstream: exiting at start as asked"`) {
		t.Fatalf("dead upstream: %v\n%s", err, out)
	}
}

func TestPlanInitCommand(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "demo.hcl")
	if b, err := exec.Command(planlockBin, "plan", "init", "--output", out, "demo", "--", refundBin).CombinedOutput(); err != nil {
		t.Fatalf("plan init: %v\n%s", err, b)
	}
	src, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	src = regexp.MustCompile(`(?m)^  # (step |  |\})`).ReplaceAll(src, []byte("  $1"))
	plan, diags := hclplan.Parse(out, src)
	if diags.HasErrors() {
		t.Fatalf("uncommented skeleton: %v", diags)
	}
	if len(plan.Steps) != 5 || plan.Upstream == nil || plan.Upstream.Command[0] != refundBin {
		t.Fatalf("skeleton: %d steps, upstream %+v", len(plan.Steps), plan.Upstream)
	}
	// It never overwrites.
	if b, err := exec.Command(planlockBin, "plan", "init", "--output", out, "demo", "--", refundBin).CombinedOutput(); err == nil {
		t.Fatalf("plan init overwrote %s: %s", out, b)
	}
}

func TestMCPConfigCommand(t *testing.T) {
	plan := writePlan(t, refundPlan)
	b, err := exec.Command(planlockBin, "mcp-config", "--plan", plan, "--insecure-skip-verify", "--", "node", "server.js").Output()
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		MCPServers map[string]struct {
			Command string
			Args    []string
		}
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	s, ok := cfg.MCPServers["refund-4711"]
	if !ok || s.Command != planlockBin || strings.Join(s.Args, " ") != "proxy --plan "+plan+" --insecure-skip-verify -- node server.js" {
		t.Fatalf("snippet:\n%s", b)
	}
	// The trust policy is passed on, with absolute file paths.
	cmd := exec.Command(planlockBin, "mcp-config", "--plan", plan, "--path", "plans/refund.hcl", "--key", "release.pub", "--certificate-github-workflow-ref", "refs/heads/main", "--", "node", "server.js")
	cmd.Dir = filepath.Dir(plan)
	if b, err = cmd.Output(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"--key",
        "`+filepath.Join(filepath.Dir(plan), "release.pub")+`"`) || !strings.Contains(string(b), `"--certificate-github-workflow-ref",
        "refs/heads/main"`) {
		t.Fatalf("snippet with a trust policy:\n%s", b)
	}
}

// TestSyncEachCallFlag: by default a step with a large budget is counted in
// leases (one durable lease record for many calls); --sync-each-call makes
// every allow record durable on its own, with no lease.
func TestSyncEachCallFlag(t *testing.T) {
	const plan = `
plan "many" {
  goal  = "echo often"
  step "echo" {
    tool      = "echo"
    max_calls = 100000
    arg "message" { max_length = 10 }
  }
}
`
	for _, tt := range []struct {
		flags     []string
		wantLease bool
	}{
		{nil, true},
		{[]string{"--sync-each-call"}, false},
	} {
		dir := t.TempDir()
		args := append([]string{"proxy", "--plan", writePlan(t, plan), "--insecure-skip-verify", "--state", dir}, tt.flags...)
		c := startRaw(t, append(args, "--", testUpstreamBin)...)
		for range 3 {
			if a := c.call("echo", `{"message":"hi"}`); !a.allowed() {
				t.Fatalf("%v: %s", tt.flags, a.text())
			}
		}
		c.stdin.Close()
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("%v: proxy: %v", tt.flags, err)
		}
		audit, err := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(audit), `"type":"lease"`); got != tt.wantLease {
			t.Fatalf("%v: lease records %v, want %v:\n%s", tt.flags, got, tt.wantLease, audit)
		}
		if n := strings.Count(string(audit), `"decision":"allow"`); n != 3 {
			t.Fatalf("%v: %d allow records, want 3", tt.flags, n)
		}
	}
}
