//go:build e2e

package e2e

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/planlock/planlock/internal/testkit/peers"
	"github.com/planlock/planlock/internal/testkit/testplans"
)

// eraMatrixPlan allows two echoes of at most ten characters and nothing
// else (the modern servers also offer add).
const eraMatrixPlan = `
plan "echo" {
  goal  = "echo twice"
  order = "any"
  step "echo" {
    tool      = "echo"
    max_calls = 2
    arg "message" { max_length = 10 }
  }
}
`

// TestEveryEraCombination runs every combination of client era (the
// TypeScript SDK v2 client in legacy mode or pinned to 2026-07-28) ×
// upstream era (the legacy test upstream; the SDK v2 server serving both
// eras; the SDK v2 server with legacy rejected), each over stdio and HTTP
// × front (proxy over stdio,
// proxy over HTTP, serve) with the plan enforced: the client connects in
// its era, sees only the planned tool, two echoes go through, a too-long
// echo, a tool outside the plan and a third echo are refused, and the
// upstream receives exactly the two allowed.
func TestEveryEraCombination(t *testing.T) {
	t.Parallel()
	peers.Node(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	// An upstream is a command (stdio) or a URL (streamable HTTP), started
	// by the test.
	type upstream struct {
		command []string
		url     string
	}
	modernServer := func(t *testing.T, log string, http bool, extra ...string) upstream {
		argv := append([]string{node, filepath.Join(peersDir(t), "modern-server.mjs"), "--calls-log", log}, extra...)
		if http {
			return upstream{url: peers.StartListening(t, append(argv, "--http"), nil)}
		}
		return upstream{command: argv}
	}
	upstreams := []struct {
		name  string
		start func(t *testing.T, callsLog string) upstream
	}{
		{"legacy stdio upstream", func(t *testing.T, log string) upstream {
			return upstream{command: []string{testUpstreamBin, "--calls-log", log}}
		}},
		{"legacy HTTP upstream", func(t *testing.T, log string) upstream {
			return upstream{url: startLogged(t, nil, `(http://\S+/mcp)`, testUpstreamBin, "--http", "127.0.0.1:0", "--calls-log", log)}
		}},
		{"dual-era stdio upstream", func(t *testing.T, log string) upstream { return modernServer(t, log, false, "--dual") }},
		{"dual-era HTTP upstream", func(t *testing.T, log string) upstream { return modernServer(t, log, true, "--dual") }},
		{"modern-only stdio upstream", func(t *testing.T, log string) upstream { return modernServer(t, log, false) }},
		{"modern-only HTTP upstream", func(t *testing.T, log string) upstream { return modernServer(t, log, true) }},
	}
	// proxyArgs are proxy's flags and arguments for up.
	proxyArgs := func(t *testing.T, up upstream, flags ...string) []string {
		args := append([]string{"proxy", "--plan", writePlan(t, eraMatrixPlan), "--insecure-skip-verify",
			"--state", filepath.Join(t.TempDir(), "state")}, flags...)
		if up.url != "" {
			return append(args, "--upstream-url", up.url)
		}
		return append(append(args, "--"), up.command...)
	}
	fronts := []struct {
		name  string
		start func(t *testing.T, up upstream) peers.Target
	}{
		{"proxy stdio", func(t *testing.T, up upstream) peers.Target {
			return peers.Stdio(append([]string{planlockBin}, proxyArgs(t, up)...)...)
		}},
		{"proxy HTTP", func(t *testing.T, up upstream) peers.Target {
			return peers.HTTP(startLogged(t, nil, `on (http://\S+/mcp)`, planlockBin, proxyArgs(t, up, "--listen", "127.0.0.1:0")...), "")
		}},
		{"serve", func(t *testing.T, up upstream) peers.Target {
			plan := testplans.WithUpstreamCommand(eraMatrixPlan, up.command)
			if up.url != "" {
				plan = testplans.WithUpstreamURL(eraMatrixPlan, up.url)
			}
			sp := startServe(t, filepath.Join(t.TempDir(), "state"), map[string]string{"echo": plan})
			return peers.HTTP(sp.base+"/mcp/echo", sp.token)
		}},
	}
	clients := []struct{ negotiation, era, version string }{
		{"legacy", "legacy", "2025-11-25"},
		{"2026-07-28", "modern", "2026-07-28"},
	}
	for _, c := range clients {
		for _, u := range upstreams {
			for _, f := range fronts {
				t.Run(c.era+" client/"+u.name+"/"+f.name, func(t *testing.T) {
					t.Parallel()
					callsLog := filepath.Join(t.TempDir(), "calls.jsonl")
					target := f.start(t, u.start(t, callsLog))
					target.Negotiation = c.negotiation
					tr := peers.RunAgent(t, target, peers.Script{Steps: []peers.Step{
						peers.ListTools(),
						peers.CallTool("echo", map[string]any{"message": "one"}),
						peers.CallTool("echo", map[string]any{"message": "far longer than ten"}),
						peers.CallTool("add", map[string]any{"a": 2, "b": 3}),
						peers.CallTool("echo", map[string]any{"message": "two"}),
						peers.CallTool("echo", map[string]any{"message": "three"}),
					}})
					if !tr.Connect.OK || tr.Connect.Era != c.era || tr.Connect.ProtocolVersion != c.version {
						t.Fatalf("connect: ok %v, era %q %q, want %q %q\n%s", tr.Connect.OK, tr.Connect.Era, tr.Connect.ProtocolVersion, c.era, c.version, tr)
					}
					if tools := tr.Step(t, "0").Tools; !slices.Equal(tools, []string{"echo"}) {
						t.Fatalf("tools/list shows %v, want only the planned echo\n%s", tools, tr)
					}
					for id, msg := range map[string]string{"1": "one", "4": "two"} {
						if r := tr.Step(t, id); !r.OK || r.IsError || r.Text != msg {
							t.Fatalf("allowed call %s: %+v\n%s", id, r, tr)
						}
					}
					for id, why := range map[string]string{"2": "more than the maximum length 10", "3": "add", "5": "max_calls 2 used up"} {
						r := tr.Step(t, id)
						said := r.Text
						if r.Error != nil {
							said = r.Error.Message
						}
						if r.OK && !r.IsError || !strings.Contains(said, why) {
							t.Fatalf("refused call %s: %+v, want it refused for %q\n%s", id, r, why, tr)
						}
					}
					if got := strings.Count(readString(callsLog), `"tool":"echo"`); got != 2 {
						t.Fatalf("the upstream received %d echo calls, want the 2 allowed:\n%s", got, readString(callsLog))
					}
					if strings.Contains(readString(callsLog), `"tool":"add"`) {
						t.Fatal("the upstream received add, which the plan does not allow")
					}
				})
			}
		}
	}
}
