//go:build e2e

package e2e

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/planlock/planlock/internal/testkit/peers"
)

// TestSDKv2ClientThroughPlanlock drives planlock with the TypeScript SDK v2
// client (@modelcontextprotocol/client 2.4.0) in each of its negotiation
// modes (legacy, auto, pinned to 2026-07-28), through proxy over stdio and
// HTTP and through serve: the connection is in the era the mode asks for,
// the agent sees only the planned tool, two calls go through, the third is
// blocked past max_calls, and the upstream receives exactly two.
func TestSDKv2ClientThroughPlanlock(t *testing.T) {
	t.Parallel()
	peers.Node(t)
	fronts := echoFronts()
	modes := []struct{ negotiation, era, version string }{
		{"legacy", "legacy", "2025-11-25"},
		{"auto", "modern", "2026-07-28"},
		{"2026-07-28", "modern", "2026-07-28"},
	}
	for _, m := range modes {
		for _, f := range fronts {
			t.Run(m.negotiation+"/"+f.name, func(t *testing.T) {
				t.Parallel()
				callsLog := filepath.Join(t.TempDir(), "calls.jsonl")
				target := f.start(t, callsLog)
				target.Negotiation = m.negotiation
				tr := peers.RunAgent(t, target, peers.Script{Steps: []peers.Step{
					peers.ListTools(),
					peers.CallTool("echo", map[string]any{"message": "one"}),
					peers.CallTool("echo", map[string]any{"message": "two"}),
					peers.CallTool("echo", map[string]any{"message": "three"}),
				}})
				if !tr.Connect.OK || tr.Connect.Era != m.era || tr.Connect.ProtocolVersion != m.version {
					t.Fatalf("connect: ok %v, era %q %q, want %q %q\n%s", tr.Connect.OK, tr.Connect.Era, tr.Connect.ProtocolVersion, m.era, m.version, tr)
				}
				if tools := tr.Step(t, "0").Tools; !slices.Equal(tools, []string{"echo"}) {
					t.Fatalf("tools/list shows %v, want only the planned echo", tools)
				}
				for id, msg := range map[string]string{"1": "one", "2": "two"} {
					if r := tr.Step(t, id); !r.OK || r.IsError || r.Text != msg {
						t.Fatalf("allowed call %s: %+v", id, r)
					}
				}
				if r := tr.Step(t, "3"); !r.OK || !r.IsError || !strings.Contains(r.Text, "max_calls 2 used up") {
					t.Fatalf("the third call: %+v, want it blocked past max_calls", r)
				}
				if got := strings.Count(readString(callsLog), `"tool":"echo"`); got != 2 {
					t.Fatalf("the upstream received %d echo calls, want the 2 allowed", got)
				}
			})
		}
	}
}
