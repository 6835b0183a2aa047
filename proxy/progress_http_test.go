package proxy

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/proxy/ledger"
)

// TestHTTPProgressArrivesBeforeTheAnswer: over streamable HTTP, mcp-go's
// forwarder takes a notification off the session's queue and writes it in a
// second step, and drops it if the answer was written in between. The proxy
// answers a call only once its own response stream has carried every
// progress notification queued for it, so many sessions calling at once (the
// load under which the race shows) still get every notification, before the
// result.
func TestHTTPProgressArrivesBeforeTheAnswer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plan, diags := hclplan.Parse("plan.hcl", []byte(`
plan "progress" {
  goal  = "progress under load"
  order = "any"
  step "progress" {
    tool      = "progress"
    max_calls = 100000
    arg "steps" { max = 5 }
  }
}`))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	l, err := ledger.Open(ctx, ledger.Options{Dir: filepath.Join(t.TempDir(), "state")})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	env, _ := UpstreamEnv(nil, func(string) (string, bool) { return "", false })
	p, err := New(Config{Plan: plan, State: l, Upstream: UpstreamConfig{Command: []string{testUpstreamBin}, Env: env}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.ServeHTTP(ctx, ln, "")
	url := "http://" + ln.Addr().String() + "/mcp"

	const sessions, calls, steps = 16, 10, 3
	var wg sync.WaitGroup
	var short atomic.Int64
	for s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr, err := transport.NewStreamableHTTP(url)
			if err != nil {
				t.Error(err)
				return
			}
			c := client.NewClient(tr)
			var mu sync.Mutex
			got := map[string]int{}
			c.OnNotification(func(n mcp.JSONRPCNotification) {
				if n.Method == "notifications/progress" {
					mu.Lock()
					got[fmt.Sprint(n.Params.AdditionalFields["progressToken"])]++
					mu.Unlock()
				}
			})
			if err := c.Start(ctx); err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			init := mcp.InitializeRequest{}
			init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
			if _, err := c.Initialize(ctx, init); err != nil {
				t.Error(err)
				return
			}
			for i := range calls {
				tok := fmt.Sprintf("s%d-c%d", s, i)
				req := mcp.CallToolRequest{}
				req.Params.Name = "progress"
				req.Params.Arguments = map[string]any{"steps": steps}
				req.Params.Meta = &mcp.Meta{ProgressToken: tok}
				res, err := c.CallTool(ctx, req)
				if err != nil || res.IsError {
					t.Errorf("call %s: %v %+v", tok, err, res)
					return
				}
				// The client handles a stream's events in order, so the
				// notifications written before the answer are counted now.
				mu.Lock()
				n := got[tok]
				mu.Unlock()
				if n != steps {
					short.Add(1)
					t.Errorf("call %s: %d progress notifications before its result, want %d", tok, n, steps)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d calls with %d progress notifications each over %d sessions; %d short", sessions*calls, steps, sessions, short.Load())
}
