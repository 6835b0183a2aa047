//go:build e2e

package main

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/story.golden")

// normalize replaces what changes from run to run (the directory, hashes,
// hold IDs, commits, times) so that the story can be compared with a golden
// file.
func normalize(out, dir string) string {
	out = strings.ReplaceAll(out, dir, "$DIR")
	// The two script hashes are part of the story: keep them.
	out = strings.NewReplacer(approvedHash, "\x00approved", changedHash, "\x00changed").Replace(out)
	for _, r := range []struct{ re, with string }{
		{`\b[0-9a-f]{64}\b`, "<sha256>"},
		{`\b[0-9a-f]{16}\b`, "<hold-id>"},
		{`\b[0-9a-f]{12}\b`, "<commit>"},
		{`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`, "<time>"},
	} {
		out = regexp.MustCompile(r.re).ReplaceAllString(out, r.with)
	}
	return strings.NewReplacer("\x00approved", approvedHash, "\x00changed", changedHash).Replace(out)
}

// The demo's story is the test: real git (bare origin, clones, merges), the
// planlock binary (approve, keygen, sign, verify, proxy, audit verify), the
// refund server as upstream and the mcp-go client as the agent. Only GitHub
// is absent: without a token planlock pushes branches and the reviewer
// merges them with git, which is the Git-only mode the product documents.

func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
}

func TestDemo(t *testing.T) {
	needGit(t)
	var out strings.Builder
	dir := t.TempDir()
	err := run(context.Background(), &out, options{Dir: dir})
	t.Log(out.String())
	if err != nil {
		t.Fatalf("the demo failed: %v", err)
	}
	got := out.String()
	golden := filepath.Join("testdata", "story.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(normalize(got, dir)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if norm := normalize(got, dir); norm != string(want) {
		t.Errorf("the story differs from %s (go test -update rewrites it):\n%s", golden, norm)
	}
	if strings.Contains(got, "✘") {
		t.Fatalf("a step is marked ✘ but run returned no error")
	}
	for _, want := range []string{
		`blocked by plan "refund-4711": step "refund": argument "amount" = 300 is above the maximum 30`,
		`blocked by plan "refund-4711": step "refund": argument "order_id" = "4712", want "4711"`,
		`step "email" is not allowed yet: step "refund" needs a successful call first`,
		`held: step "refund": pin get_script_by_path.hash = "0c1f2e3d4b5a6978", want "9f86d081884c7d65"`,
		`max_calls 2 used up (2 calls forwarded)`,
		"shown: close_ticket, get_order, refund_customer, send_email",
		"ok: 16 records",
		"not published yet (CI signs merged holds)",
		"consumed refund refund_customer",
		"Summary: 39 of 39 steps went as expected.",
		"would_allow get_order, would_allow refund_customer, would_allow send_email, would_allow close_ticket",
		"4 calls went through",
		"ok  \tplans/refund.hcl\t1 test",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the story lacks %q", want)
		}
	}
}

// An outcome other than the expected one is marked ✘ and fails the run:
// here the plan is approved with a maximum of 300 EUR, so the 300 EUR
// refund is forwarded (and refused by the refund system itself) instead of
// blocked, and the audit log and the calls log no longer match.
func TestDemoReportsAnUnexpectedOutcome(t *testing.T) {
	needGit(t)
	var out strings.Builder
	err := run(context.Background(), &out, options{Dir: t.TempDir(), editPlan: func(p string) string {
		return strings.Replace(p, "max = 30", "max = 300", 1)
	}})
	t.Log(out.String())
	if err == nil || !strings.Contains(err.Error(), "differ from the expected outcome") {
		t.Fatalf("run = %v, want the differing steps reported", err)
	}
	got := out.String()
	for _, want := range []string{
		"✘ agent: refund_customer 300 EUR on order 4711 (above the approved maximum) (expected: blocked)\n    → failed upstream:",
		"✘ refund system: its calls log holds exactly",
		"✘ auditor: the audit log records every decision, in order",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the story lacks %q", want)
		}
	}
	if strings.Contains(got, "Summary: 39 of 39") {
		t.Errorf("the summary claims success")
	}
}
