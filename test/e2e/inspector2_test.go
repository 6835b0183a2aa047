//go:build e2e

package e2e

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/planlock/planlock/internal/testkit/peers"
	"github.com/planlock/planlock/internal/testkit/testplans"
)

const inspector2Plan = `
plan "echo" {
  goal  = "echo twice"
  order = "any"
  step "echo" {
    tool      = "echo"
    max_calls = 2
    arg "message" { any = true }
  }
}
`

// echoFront starts planlock in front of the test upstream (which logs the
// calls it receives to callsLog) with inspector2Plan, and says how a client
// reaches it.
type echoFront struct {
	name  string
	start func(t *testing.T, callsLog string) peers.Target
}

// echoFronts are proxy over stdio, proxy over HTTP and serve.
func echoFronts() []echoFront {
	return []echoFront{
		{"proxy stdio", func(t *testing.T, callsLog string) peers.Target {
			return peers.Stdio(planlockBin, "proxy", "--plan", writePlan(t, inspector2Plan), "--insecure-skip-verify",
				"--state", filepath.Join(t.TempDir(), "state"), "--", testUpstreamBin, "--calls-log", callsLog)
		}},
		{"proxy HTTP", func(t *testing.T, callsLog string) peers.Target {
			url := startLogged(t, nil, `on (http://\S+/mcp)`, planlockBin, "proxy", "--plan", writePlan(t, inspector2Plan), "--insecure-skip-verify",
				"--state", filepath.Join(t.TempDir(), "state"), "--listen", "127.0.0.1:0", "--", testUpstreamBin, "--calls-log", callsLog)
			return peers.HTTP(url, "")
		}},
		{"serve", func(t *testing.T, callsLog string) peers.Target {
			sp := startServe(t, filepath.Join(t.TempDir(), "state"),
				map[string]string{"echo": testplans.WithUpstreamCommand(inspector2Plan, []string{testUpstreamBin, "--calls-log", callsLog})})
			return peers.HTTP(sp.base+"/mcp/echo", sp.token)
		}},
	}
}

// inspector2Answer is the Inspector 2 CLI's JSON output.
type inspector2Answer struct {
	Result struct {
		Meta    map[string]json.RawMessage `json:"_meta"`
		Tools   []struct{ Name string }    `json:"tools"`
		Content []struct{ Text string }    `json:"content"`
		IsError bool                       `json:"isError"`
	} `json:"result"`
	Error *struct{ Code, Message string } `json:"error"`
}

// TestInspector2ThroughPlanlock drives planlock with the Inspector 2.12 CLI
// in each protocol era it negotiates (legacy, auto, modern), through proxy
// over stdio and HTTP and through serve: the agent sees only the planned
// tool, the allowed calls go through, the call past max_calls is blocked
// with its reason, and the upstream receives exactly the allowed ones.
func TestInspector2ThroughPlanlock(t *testing.T) {
	t.Parallel()
	peers.Node(t)
	fronts := echoFronts()
	for _, era := range []string{"legacy", "auto", "modern"} {
		for _, f := range fronts {
			t.Run(era+"/"+f.name, func(t *testing.T) {
				t.Parallel()
				callsLog := filepath.Join(t.TempDir(), "calls.jsonl")
				target := f.start(t, callsLog)
				ask := func(args ...string) (inspector2Answer, error) {
					t.Helper()
					out, err := peers.Inspector2(t, target, era, args...)
					var a inspector2Answer
					if jerr := json.Unmarshal([]byte(out), &a); jerr != nil {
						t.Fatalf("inspector output is not JSON (%v; run error %v):\n%s", jerr, err, out)
					}
					return a, err
				}
				list, err := ask("--method", "tools/list")
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, tl := range list.Result.Tools {
					names = append(names, tl.Name)
				}
				if !slices.Equal(names, []string{"echo"}) {
					t.Fatalf("tools/list shows %v, want only the planned echo", names)
				}
				for i, msg := range []string{"one", "two"} {
					a, err := ask("--method", "tools/call", "--tool-name", "echo", "--tool-args-json", `{"message":"`+msg+`"}`)
					if err != nil || a.Result.IsError || len(a.Result.Content) != 1 || a.Result.Content[0].Text != msg {
						t.Fatalf("allowed call %d: %+v %v", i+1, a, err)
					}
					// Only a 2026-07-28 exchange carries the server's
					// identity in a call result's _meta: the era was the
					// one asked for.
					_, modern := a.Result.Meta["io.modelcontextprotocol/serverInfo"]
					if want := era != "legacy"; modern != want {
						t.Fatalf("era %s: result _meta %v; 2026-07-28: %v, want %v", era, a.Result.Meta, modern, want)
					}
				}
				a, _ := ask("--method", "tools/call", "--tool-name", "echo", "--tool-args-json", `{"message":"three"}`)
				if !a.Result.IsError || len(a.Result.Content) != 1 || !strings.Contains(a.Result.Content[0].Text, `max_calls 2 used up`) {
					t.Fatalf("the third call: %+v, want it blocked as past max_calls", a)
				}
				if got := strings.Count(readString(callsLog), `"tool":"echo"`); got != 2 {
					t.Fatalf("the upstream received %d echo calls, want the 2 allowed", got)
				}
			})
		}
	}
}
