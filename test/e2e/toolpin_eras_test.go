//go:build e2e

package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planlock/planlock/hclplan/toolpin"
	"github.com/planlock/planlock/internal/testkit/peers"
)

// TestToolPinsModernUpstream: tool pins in front of a server of protocol
// 2026-07-28 only (the TypeScript SDK v2 with legacy rejected), over stdio
// and HTTP. planlock tools --pins writes the pin of echo from the server's
// own definition; add is pinned to a definition the server does not list
// (as after a change). echo is listed and forwarded; add is not listed and
// its call is blocked, never reaching the server.
func TestToolPinsModernUpstream(t *testing.T) {
	for _, over := range []string{"stdio", "http"} {
		t.Run(over, func(t *testing.T) {
			dir := t.TempDir()
			calls := filepath.Join(dir, "calls.jsonl")
			server := []string{"node", filepath.Join(peersDir(t), "modern-server.mjs"), "--calls-log", calls}
			upstream := append([]string{"--"}, server...)
			if over == "http" {
				upstream = []string{"--upstream-url", peers.StartListening(t, append(server, "--http"), nil)}
			}
			out, err := exec.Command(planlockBin, append([]string{"tools", "--pins"}, upstream...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("planlock tools --pins: %v\n%s", err, out)
			}
			pins := map[string]string{}
			for _, block := range strings.Split(string(out), "\n\n") {
				name, pin, _ := strings.Cut(strings.TrimSpace(block), "\n")
				pins[strings.TrimPrefix(name, "# ")] = "    " + strings.ReplaceAll(pin, "\n", "\n    ") + "\n"
			}
			if !strings.Contains(pins["echo"], "definition  = <<-JSON") {
				t.Fatalf("no pin of echo with its definition in:\n%s", out)
			}
			changed, err := toolpin.Digest([]byte(`{"name":"add","description":"Add two numbers, then mail the sum.","inputSchema":{"type":"object"}}`))
			if err != nil {
				t.Fatal(err)
			}
			plan := `plan "modern-pins" {
  goal         = "Echo under a pinned definition"
  order        = "any"
  on_violation = "block"
  step "echo" {
    tool      = "echo"
    max_calls = 2
    arg "message" { max_length = 10 }
` + pins["echo"] + `  }
  step "add" {
    tool = "add"
    arg "a" { any = true }
    arg "b" { any = true }
    tool_pin { digest = "` + changed + `" }
  }
}`
			args := append([]string{"--", planlockBin, "proxy", "--plan", writePlan(t, plan), "--insecure-skip-verify", "--state", filepath.Join(dir, "state")}, upstream...)
			lines := runAgent(t, nil, `[
 {"op":"listTools"},
 {"op":"callTool","name":"echo","arguments":{"message":"hello"}},
 {"op":"callTool","name":"add","arguments":{"a":2,"b":3}}
]`, args...)
			list := string(lines["0"].Result)
			if !strings.Contains(list, `"name":"echo"`) || strings.Contains(list, `"name":"add"`) {
				t.Fatalf("tools/list: %s, want echo and not add", list)
			}
			wantText(t, lines, "1", false, "hello")
			wantText(t, lines, "2", true, `tool definition changed: the upstream's definition of tool "add" is sha256:`)
			if got := peers.ReadCalls(t, calls); len(got) != 1 || got[0].Tool != "echo" {
				t.Fatalf("the upstream got %+v, want one echo", got)
			}
		})
	}
}
