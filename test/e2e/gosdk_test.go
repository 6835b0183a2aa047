//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/planlock/planlock/internal/testkit/testplans"
)

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// goSDKUpstream is an upstream built on the official Go SDK (it speaks
// 2026-07-28 and the older revisions), over streamable HTTP, with the tool
// echo; calls counts the calls it received.
func goSDKUpstream(t *testing.T) (url string, calls *atomic.Int32) {
	srv := gosdk.NewServer(&gosdk.Implementation{Name: "go-sdk-upstream", Version: "1.0.0"}, nil)
	calls = &atomic.Int32{}
	type in struct {
		Message string `json:"message"`
	}
	gosdk.AddTool(srv, &gosdk.Tool{Name: "echo", Description: "echoes"}, func(ctx context.Context, req *gosdk.CallToolRequest, a in) (*gosdk.CallToolResult, any, error) {
		calls.Add(1)
		return &gosdk.CallToolResult{Content: []gosdk.Content{&gosdk.TextContent{Text: a.Message}}}, nil, nil
	})
	gosdk.AddTool(srv, &gosdk.Tool{Name: "unplanned", Description: "not in the plan"}, func(ctx context.Context, req *gosdk.CallToolRequest, a struct{}) (*gosdk.CallToolResult, any, error) {
		calls.Add(1)
		return &gosdk.CallToolResult{Content: []gosdk.Content{&gosdk.TextContent{Text: "reached"}}}, nil, nil
	})
	hs := httptest.NewServer(gosdk.NewStreamableHTTPHandler(func(*http.Request) *gosdk.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return hs.URL, calls
}

// TestGoSDKThroughPlanlock drives planlock with the official Go SDK's
// client, in 2026-07-28 (its default) and 2025-11-25, through proxy over
// stdio and HTTP and through serve, in front of the test upstream and of an
// upstream built on the Go SDK itself: the client sees only the planned
// tool, two calls go through, the third is blocked past max_calls, and the
// upstream receives exactly two.
func TestGoSDKThroughPlanlock(t *testing.T) {
	t.Parallel()
	upstreams := []struct {
		name string
		// argv is the proxy's upstream arguments (after the plan's);
		// plan is the plan with its upstream for serve.
		start func(t *testing.T) (argv []string, servePlan string, received func(t *testing.T) int)
	}{
		{"test upstream (stdio)", func(t *testing.T) ([]string, string, func(*testing.T) int) {
			log := filepath.Join(t.TempDir(), "calls.jsonl")
			argv := []string{testUpstreamBin, "--calls-log", log}
			return append([]string{"--"}, argv...), testplans.WithUpstreamCommand(inspector2Plan, argv),
				func(t *testing.T) int { return strings.Count(readString(log), `"tool":"echo"`) }
		}},
		{"Go SDK upstream (HTTP)", func(t *testing.T) ([]string, string, func(*testing.T) int) {
			url, calls := goSDKUpstream(t)
			plan := strings.Replace(inspector2Plan, `order = "any"`, `order = "any"
  upstream {
    url = "`+url+`"
  }`, 1)
			return []string{"--upstream-url", url}, plan, func(*testing.T) int { return int(calls.Load()) }
		}},
	}
	fronts := []struct {
		name  string
		start func(t *testing.T, argv []string, servePlan string) gosdk.Transport
	}{
		{"proxy stdio", func(t *testing.T, argv []string, _ string) gosdk.Transport {
			args := append([]string{"proxy", "--plan", writePlan(t, inspector2Plan), "--insecure-skip-verify",
				"--state", filepath.Join(t.TempDir(), "state")}, argv...)
			return &gosdk.CommandTransport{Command: exec.Command(planlockBin, args...)}
		}},
		{"proxy HTTP", func(t *testing.T, argv []string, _ string) gosdk.Transport {
			args := append([]string{"proxy", "--plan", writePlan(t, inspector2Plan), "--insecure-skip-verify",
				"--state", filepath.Join(t.TempDir(), "state"), "--listen", "127.0.0.1:0"}, argv...)
			url := startLogged(t, nil, `on (http://\S+/mcp)`, planlockBin, args...)
			return &gosdk.StreamableClientTransport{Endpoint: url}
		}},
		{"serve", func(t *testing.T, _ []string, servePlan string) gosdk.Transport {
			sp := startServe(t, filepath.Join(t.TempDir(), "state"), map[string]string{"echo": servePlan})
			return &gosdk.StreamableClientTransport{Endpoint: sp.base + "/mcp/echo",
				HTTPClient: &http.Client{Transport: bearer{sp.token, http.DefaultTransport}}}
		}},
	}
	for _, version := range []string{"", "2025-11-25"} {
		era := "2026-07-28"
		if version != "" {
			era = version
		}
		for _, up := range upstreams {
			for _, f := range fronts {
				t.Run(era+"/"+up.name+"/"+f.name, func(t *testing.T) {
					t.Parallel()
					argv, servePlan, received := up.start(t)
					ctx := context.Background()
					c := gosdk.NewClient(&gosdk.Implementation{Name: "go-sdk-agent", Version: "1.0.0"}, nil)
					cs, err := c.Connect(ctx, f.start(t, argv, servePlan), &gosdk.ClientSessionOptions{ProtocolVersion: version})
					if err != nil {
						t.Fatalf("connect: %v", err)
					}
					defer cs.Close()
					if got := cs.InitializeResult().ProtocolVersion; got != era {
						t.Fatalf("negotiated %q, want %q", got, era)
					}
					list, err := cs.ListTools(ctx, nil)
					if err != nil {
						t.Fatal(err)
					}
					var names []string
					for _, tl := range list.Tools {
						names = append(names, tl.Name)
					}
					if !slices.Equal(names, []string{"echo"}) {
						t.Fatalf("tools/list shows %v, want only the planned echo", names)
					}
					text := func(r *gosdk.CallToolResult) string {
						var b strings.Builder
						for _, c := range r.Content {
							if tc, ok := c.(*gosdk.TextContent); ok {
								b.WriteString(tc.Text)
							}
						}
						return b.String()
					}
					for _, msg := range []string{"one", "two"} {
						r, err := cs.CallTool(ctx, &gosdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": msg}})
						if err != nil || r.IsError || text(r) != msg {
							t.Fatalf("allowed call %q: %v %v", msg, err, r)
						}
					}
					r, err := cs.CallTool(ctx, &gosdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "three"}})
					if err != nil || !r.IsError || !strings.Contains(text(r), "max_calls 2 used up") {
						t.Fatalf("the third call: %v %+v, want it blocked past max_calls", err, r)
					}
					if r, err := cs.CallTool(ctx, &gosdk.CallToolParams{Name: "unplanned", Arguments: map[string]any{}}); err == nil && !r.IsError {
						t.Fatalf("an unplanned tool was called: %s", text(r))
					}
					if got := received(t); got != 2 {
						t.Fatalf("the upstream received %d echo calls, want the 2 allowed", got)
					}
				})
			}
		}
	}
}
