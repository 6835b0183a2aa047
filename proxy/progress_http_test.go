package proxy

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/proxy/ledger"
)

// TestHTTPProgressArrivesBeforeTheAnswer: over streamable HTTP, mcp-go's
// forwarder takes a notification off the session's queue and writes it in a
// second step, and drops it if the answer was written in between. The proxy
// answers a call only once the progress queued for its session has been
// written, so many sessions calling at once (the load under which the race
// shows) still get every notification, before the result.
func TestHTTPProgressArrivesBeforeTheAnswer(t *testing.T) {
	ctx := context.Background()
	url, _ := serveHTTPInProcess(t, `
plan "progress" {
  goal  = "progress under load"
  order = "any"
  step "progress" {
    tool      = "progress"
    max_calls = 100000
    arg "steps" { max = 5 }
  }
}`, nil, ledger.Options{})

	const sessions, calls, steps = 16, 10, 3
	type session struct {
		c   *client.Client
		mu  sync.Mutex
		got map[string]int // progress notifications per token
	}
	ss := make([]*session, sessions)
	for i := range ss {
		s := &session{got: map[string]int{}}
		s.c = connectHTTP(t, ctx, url, func(n mcp.JSONRPCNotification) {
			if n.Method == "notifications/progress" {
				s.mu.Lock()
				s.got[fmt.Sprint(n.Params.AdditionalFields["progressToken"])]++
				s.mu.Unlock()
			}
		})
		ss[i] = s
	}
	var wg sync.WaitGroup
	var short atomic.Int64
	for si, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				tok := fmt.Sprintf("s%d-c%d", si, i)
				req := mcp.CallToolRequest{}
				req.Params.Name = "progress"
				req.Params.Arguments = map[string]any{"steps": steps}
				req.Params.Meta = &mcp.Meta{ProgressToken: tok}
				res, err := s.c.CallTool(ctx, req)
				if err != nil || res.IsError {
					t.Errorf("call %s: %v %+v", tok, err, res)
					return
				}
				// The client handles a stream's events in order, so the
				// notifications written before the answer are counted now.
				s.mu.Lock()
				n := s.got[tok]
				s.mu.Unlock()
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
