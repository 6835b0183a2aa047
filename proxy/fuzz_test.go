// The fuzz targets of the proxy's client input (JSON-RPC over stdio, through
// the message size limiter), driven through the exported API as a client
// sees it.
package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/proxy"
	"github.com/planlock/planlock/proxy/ledger"
)

// nullState is a State that records nothing: these targets are about the
// proxy's handling of client bytes, and no call reaches the upstream.
type nullState struct{}

func (nullState) Progress(string) ledger.Progress { return ledger.Progress{} }
func (nullState) Reserve(context.Context, ledger.Reservation) (ledger.Ticket, error) {
	return ledger.Ticket{}, errors.New("fuzz: no forwarding")
}
func (nullState) Complete(context.Context, ledger.Ticket, ledger.Outcome) error { return nil }
func (nullState) Block(context.Context, ledger.Call, string) error              { return nil }
func (nullState) NewHold(_ context.Context, c ledger.Call, spec ledger.HoldSpec) (ledger.Hold, error) {
	return ledger.Hold{ID: "h-fuzz", Tool: c.Tool, Expires: spec.Expires}, nil
}
func (nullState) FindHold(ledger.Call) (ledger.Hold, bool) { return ledger.Hold{}, false }
func (nullState) ListHolds() []ledger.Hold                 { return nil }

const plan = `
plan "fuzz" {
  goal = "fuzz the client input"
  step "lookup" {
    tool = "get_order"
    arg "order_id" { eq = "4711" }
  }
  step "refund" {
    tool = "refund_customer"
    arg "amount" {
      min = 1
      max = 30
    }
  }
}
`

const maxMessage = 4096

type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// serve runs the proxy's stdio server over in, with an upstream that cannot
// start, and returns what it wrote.
func serve(t *testing.T, in []byte) string {
	t.Helper()
	p, diags := hclplan.Parse("plan.hcl", []byte(plan))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	px, err := proxy.New(proxy.Config{Plan: p, State: nullState{}, MaxMessageBytes: maxMessage, CallTimeout: time.Second,
		Upstream: proxy.UpstreamConfig{Command: []string{"/nonexistent/planlock-fuzz-upstream"}}})
	if err != nil {
		t.Fatal(err)
	}
	var out buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := px.ServeStdio(ctx, bytes.NewReader(in), &out); err != nil {
		t.Fatalf("serve: %v", err)
	}
	s := out.b.String()
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if line == "" {
			continue
		}
		var m struct {
			JSONRPC string `json:"jsonrpc"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil || m.JSONRPC != "2.0" {
			t.Fatalf("the proxy wrote a line that is not JSON-RPC 2.0: %q", line)
		}
	}
	return s
}

// FuzzJSONRPCInput feeds arbitrary bytes to the proxy's stdio server as the
// client's messages. The proxy never crashes, writes only JSON-RPC 2.0
// lines, and answers a single malformed line with a parse error and an
// over-long one with an invalid-request error naming the limit.
func FuzzJSONRPCInput(f *testing.F) {
	seeds := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"f","version":"1"}}}` + "\n" +
			`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
			`{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + "\n" +
			`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_order","arguments":{"order_id":"4711"}}}` + "\n",
		`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"refund_customer","arguments":{"amount":1,"amount":300}}}` + "\n",
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"get_order","arguments":[1]}}` + "\n",
		`{"jsonrpc":"2.0","id":5,"method":"resources/list"}` + "\n",
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":null}` + "\n",
		`{"jsonrpc":"2.0","id":7,"result":{}}` + "\n",
		"not json\n",
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"get_order","arguments":{"order_id":"` + strings.Repeat("x", 5000) + `"}},"id":8}` + "\n",
		"\n\n",
		"[]\n",
		`{"jsonrpc":"2.0","id":9,"method":"ping"}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got := serve(t, in)
		// One complete line in (mcp-go drops an unterminated last line at
		// end of input: the client has stopped sending).
		body, complete := bytes.CutSuffix(in, []byte("\n"))
		if !complete || bytes.Contains(body, []byte("\n")) {
			return
		}
		switch {
		case len(in) > maxMessage:
			if !strings.Contains(got, `"code":-32600`) || !strings.Contains(got, "--max-message-bytes") {
				t.Fatalf("an over-long line got %q", got)
			}
		case !json.Valid(body) || len(bytes.TrimSpace(body)) == 0:
			if !strings.Contains(got, `"code":-32700`) {
				t.Fatalf("a malformed line got %q, want a parse error", got)
			}
		}
	})
}

// FuzzOversizeKeepsID sends one over-long tools/call whose id sits first or
// last: the refusal carries that id, so the client can match it.
func FuzzOversizeKeepsID(f *testing.F) {
	f.Add("params", "7", true, false)
	f.Add(`a"b\"}`, "x,y}", false, true)
	f.Add("", "-1.5e3", true, true)
	f.Fuzz(func(t *testing.T, params, id string, numeric, idFirst bool) {
		idJSON, _ := json.Marshal(id)
		if numeric {
			var n json.Number
			if json.Unmarshal([]byte(id), &n) != nil || strings.TrimSpace(id) != id {
				return
			}
			idJSON = []byte(id)
		}
		if len(idJSON) > 256 {
			return // longer than any id the limiter keeps
		}
		pj, _ := json.Marshal(map[string]any{"name": "get_order", "arguments": map[string]any{"order_id": params + strings.Repeat(" ", maxMessage)}})
		var msg string
		if idFirst {
			msg = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":%s}`, idJSON, pj)
		} else {
			msg = fmt.Sprintf(` { "jsonrpc" : "2.0", "method":"tools/call" ,"params": %s , "id" : %s } `, pj, idJSON)
		}
		got := serve(t, []byte(msg+"\n"))
		var a struct {
			ID    json.RawMessage `json:"id"`
			Error struct{ Code int }
		}
		if err := json.Unmarshal([]byte(got), &a); err != nil {
			t.Fatalf("answer %q: %v", got, err)
		}
		var want, have any
		_ = json.Unmarshal(idJSON, &want)
		_ = json.Unmarshal(a.ID, &have)
		if a.Error.Code != -32600 || fmt.Sprint(have) != fmt.Sprint(want) {
			t.Fatalf("answer %q, want error -32600 with id %s", got, idJSON)
		}
	})
}
