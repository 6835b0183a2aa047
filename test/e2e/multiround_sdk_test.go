//go:build e2e

package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/planlock/planlock/internal/testkit/peers"
)

// TestMultiRoundSDKv2Client: the TypeScript SDK v2 client (2.4.0, pinned
// to 2026-07-28) with an elicitation answer runs a multi-round call through
// planlock proxy over stdio and HTTP: the SDK runs the form the plan allows
// once, retries with planlock's requestState, and gets the upstream's
// completed result, the call counted once (max_calls = 1: a second call is
// refused).
func TestMultiRoundSDKv2Client(t *testing.T) {
	t.Parallel()
	plan := writePlan(t, multiRoundReplicaPlan)
	for _, front := range []string{"stdio", "http"} {
		t.Run(front, func(t *testing.T) {
			t.Parallel()
			calls := filepath.Join(t.TempDir(), "calls.jsonl")
			args := []string{"proxy", "--plan", plan, "--insecure-skip-verify", "--state", filepath.Join(t.TempDir(), "state")}
			upstream := []string{"--", testUpstreamBin, "--mode", "multi-round", "--calls-log", calls}
			var target peers.Target
			if front == "stdio" {
				target = peers.Stdio(append(append([]string{planlockBin}, args...), upstream...)...)
			} else {
				url := startLogged(t, nil, `on (http://\S+/mcp)`, planlockBin, append(append(args, "--listen", "127.0.0.1:0"), upstream...)...)
				target = peers.HTTP(url, "")
			}
			target.Negotiation = "2026-07-28"
			tr := peers.RunAgent(t, target, peers.Script{
				Elicitation: &peers.ElicitationAnswer{Action: "accept", Content: map[string]any{"password": "hunter2"}},
				Steps: []peers.Step{
					peers.CallTool("ask", map[string]any{"resultType": "elicit"}),
					peers.CallTool("ask", map[string]any{"resultType": "elicit"}),
				}})
			if !tr.Connect.OK || tr.Connect.Era != "modern" {
				t.Fatalf("connect: %s", tr)
			}
			done := tr.Step(t, "0")
			if !done.OK || done.IsError || !strings.Contains(done.Text, `call done; state upstream-state-1; answers {"password":{"action":"accept","content":{"password":"hunter2"}}}`) {
				t.Errorf("the multi-round call: %s", tr)
			}
			if n := len(tr.ServerRequests); n != 1 || !strings.Contains(string(tr.ServerRequests[0].Params), "enter your password") {
				t.Errorf("the client ran %d input requests, want the one form: %s", n, tr)
			}
			// The second call is over max_calls = 1: the two rounds of the
			// first counted once.
			if over := tr.Step(t, "1"); !strings.Contains(over.Text+string(over.Result), "max_calls") {
				t.Errorf("a second call: %s", tr)
			}
			if n := len(loggedCalls(t, calls)); n != 2 {
				t.Errorf("the upstream got %d requests, want 2 (first round and retry)", n)
			}
		})
	}
}
