//go:build e2e

package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/planlock/planlock/internal/testkit/peers"
	"github.com/planlock/planlock/internal/testkit/testplans"
)

// TestLegacyUpstreamSamplingThroughPlanlock: server-everything (protocol
// 2025-era) asks the client for sampling during a call. Through the built
// planlock (proxy over stdio, proxy --listen, serve), the TypeScript SDK
// v2 client in its legacy mode answers a request within the plan's
// max_tokens, and its answer reaches the upstream's result; a request over
// it reaches no handler and the call ends with the plan's error; a client
// of 2026-07-28 is never asked.
func TestLegacyUpstreamSamplingThroughPlanlock(t *testing.T) {
	t.Parallel()
	upstream := peers.EverythingStdio(t)
	fronts := []struct {
		name  string
		start func(t *testing.T) peers.Target
	}{
		{"proxy stdio", func(t *testing.T) peers.Target {
			return peers.Stdio(append([]string{planlockBin, "proxy", "--plan", writePlan(t, testplans.LegacySampling), "--insecure-skip-verify",
				"--state", filepath.Join(t.TempDir(), "state"), "--"}, upstream...)...)
		}},
		{"proxy HTTP", func(t *testing.T) peers.Target {
			return peers.HTTP(startLogged(t, nil, `on (http://\S+/mcp)`, planlockBin, append([]string{"proxy", "--plan", writePlan(t, testplans.LegacySampling),
				"--insecure-skip-verify", "--state", filepath.Join(t.TempDir(), "state"), "--listen", "127.0.0.1:0", "--"}, upstream...)...), "")
		}},
		{"serve", func(t *testing.T) peers.Target {
			sp := startServe(t, filepath.Join(t.TempDir(), "state"), map[string]string{"ask": testplans.WithUpstreamCommand(testplans.LegacySampling, upstream)})
			return peers.HTTP(sp.base+"/mcp/ask", sp.token)
		}},
	}
	for _, f := range fronts {
		for _, negotiation := range []string{"legacy", "2026-07-28"} {
			t.Run(f.name+"/"+negotiation, func(t *testing.T) {
				t.Parallel()
				target := f.start(t)
				target.Negotiation = negotiation
				tr := peers.RunAgent(t, target, peers.Script{Sampling: &peers.SamplingAnswer{Text: "from the agent"}, Steps: []peers.Step{
					peers.CallTool("trigger-sampling-request", map[string]any{"prompt": "hi", "maxTokens": 100}),
					peers.CallTool("trigger-sampling-request", map[string]any{"prompt": "hi", "maxTokens": 1000}),
				}})
				if !tr.Connect.OK {
					t.Fatalf("connect\n%s", tr)
				}
				within, over := tr.Step(t, "0"), tr.Step(t, "1")
				if negotiation == "legacy" {
					if !within.OK || within.IsError || !strings.Contains(within.Text, "from the agent") {
						t.Fatalf("sampling within max_tokens: %+v, want the agent's answer in the result\n%s", within, tr)
					}
				} else if within.OK && !within.IsError || !strings.Contains(within.Text, "cannot be asked during a call") {
					t.Fatalf("sampling for a 2026-07-28 client: %+v, want the plan's error\n%s", within, tr)
				}
				if over.OK && !over.IsError || !strings.Contains(over.Text, "the upstream asked for input this plan does not allow") {
					t.Fatalf("sampling over max_tokens: %+v, want the plan's error\n%s", over, tr)
				}
				// The agent was asked once, for the call within the bounds,
				// and only in the legacy era.
				if want := map[string]int{"legacy": 1, "2026-07-28": 0}[negotiation]; len(tr.ServerRequests) != want {
					t.Fatalf("the agent was asked %d times, want %d\n%s", len(tr.ServerRequests), want, tr)
				}
			})
		}
	}
}
