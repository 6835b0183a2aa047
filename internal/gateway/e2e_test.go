//go:build e2e

package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/planlock/planlock/internal/authn"
	"github.com/planlock/planlock/internal/testkit/peers"
	"github.com/planlock/planlock/proxy/ledger"
)

// TestEndToEnd: three plans behind one gateway, two kinds of upstream
// (server-everything over stdio, the Go test upstream over HTTP and over
// stdio), four bearer identities, and the official TypeScript SDK client as
// the agent. Each identity reaches exactly its plans, and every audit
// record names who made the call.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node and upstream processes")
	}
	bins, err := peers.BuildCommands(t.TempDir(), peers.PkgTestUpstream)
	if err != nil {
		t.Fatal(err)
	}
	up := bins[peers.PkgTestUpstream]
	upURL := peers.StartHTTP(t, up)
	quote := func(argv []string) string {
		b, _ := json.Marshal(argv)
		return string(b)
	}
	plans := t.TempDir()
	writePlan(t, plans, "docs.hcl", fmt.Sprintf(`plan "docs" {
  goal  = "echo through the reference server"
  order = "any"
  upstream {
    command = %s
  }
  step "say" {
    tool      = "echo"
    max_calls = 5
    arg "message" { max_length = 20 }
  }
}
`, quote(peers.EverythingStdio(t))))
	writePlan(t, plans, "ops.hcl", fmt.Sprintf(`plan "ops" {
  goal  = "echo over HTTP, wait only with approval"
  order = "any"
  upstream {
    url = %q
  }
  step "say" {
    tool      = "echo"
    max_calls = 5
    arg "message" { max_length = 20 }
  }
  step "wait" {
    tool     = "slow"
    approval = "each"
    arg "ms" { max = 10 }
  }
}
`, upURL))
	writePlan(t, plans, "billing.hcl", fmt.Sprintf(`plan "billing" {
  goal  = "echo through a stdio Go upstream"
  order = "any"
  upstream {
    command = %s
  }
  step "say" {
    tool      = "echo"
    max_calls = 5
    arg "message" { max_length = 20 }
  }
}
`, quote([]string{up})))
	toks := tokenFile(t, map[string]string{
		"alice-token": "alice docs",
		"bob-token":   "bob docs,ops",
		"carol-token": "carol billing",
	})
	state := t.TempDir()
	r := start(t, Config{PlansDir: plans, StateDir: state, Authenticators: []authn.Authenticator{toks}})
	if got := r.g.Plans(); !slices.Equal(got, []string{"billing", "docs", "ops"}) {
		t.Fatalf("served %v; log:\n%s", got, r.log.String())
	}

	script := func(extra ...peers.Step) peers.Script {
		return peers.Script{Steps: append([]peers.Step{peers.ListTools(), peers.CallTool("echo", map[string]any{"message": "hi"})}, extra...)}
	}
	reach := map[string][]string{ // identity → the plans it must reach
		"alice-token":   {"docs"},
		"bob-token":     {"docs", "ops"},
		"carol-token":   {"billing"},
		"mallory-token": nil, // not in the token file
	}
	for _, tok := range []string{"alice-token", "bob-token", "carol-token", "mallory-token"} {
		for _, plan := range []string{"docs", "ops", "billing"} {
			if tok == "mallory-token" && plan != "docs" {
				continue // one refusal says it; node is slow to start
			}
			var extra []peers.Step
			if plan == "ops" {
				extra = append(extra, peers.CallTool("slow", map[string]any{"ms": 1}))
			}
			tr := peers.RunAgent(t, peers.HTTP(r.url+"/mcp/"+plan, tok), script(extra...))
			want := slices.Contains(reach[tok], plan)
			if tr.Connect.OK != want {
				t.Errorf("%s → %s: connected %v, want %v\n%s", tok, plan, tr.Connect.OK, want, tr)
				continue
			}
			if !want {
				continue
			}
			if tools := tr.Step(t, "0").Tools; !slices.Contains(tools, "echo") || (plan == "docs" && len(tools) != 1) {
				t.Errorf("%s → %s: tools %v", tok, plan, tools)
			}
			if res := tr.Step(t, "1"); !res.OK || res.IsError || res.Text == "" || !strings.Contains(res.Text, "hi") {
				t.Errorf("%s → %s: echo answered %+v", tok, plan, res)
			}
			if plan == "ops" {
				if res := tr.Step(t, "2"); !res.IsError || !strings.Contains(res.Text, "held") {
					t.Errorf("%s → ops: slow answered %+v, want held", tok, res)
				}
			}
		}
	}
	r.stop() // every outcome written

	// Each plan's audit chain names exactly the callers bound to it.
	want := map[string][]string{
		"docs":    {"allow echo token:alice", "allow echo token:bob"},
		"ops":     {"allow echo token:bob", "hold slow token:bob"},
		"billing": {"allow echo token:carol"},
	}
	for plan, decisions := range want {
		got := auditDecisions(t, filepath.Join(stateOf(state, plans, plan), "audit.jsonl"))
		if !slices.Equal(got, decisions) {
			t.Errorf("%s audit decisions %v, want %v", plan, got, decisions)
		}
	}
	// The hold remembers who asked (a hold pull request says "Requested by").
	l, err := ledger.Open(context.Background(), ledger.Options{Dir: stateOf(state, plans, "ops")})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	holds := l.ListHolds()
	if len(holds) != 1 || holds[0].RequestedBy != "token:bob" || holds[0].Tool != "slow" {
		t.Errorf("ops holds %+v, want one for slow requested by token:bob", holds)
	}
}

// auditDecisions are the decision records of an audit log as
// "decision tool caller", sorted.
func auditDecisions(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec struct{ Type, Decision, Tool, Caller string }
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Type == "decision" {
			out = append(out, rec.Decision+" "+rec.Tool+" "+rec.Caller)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

var testUpstream = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "gateway-test")
	if err != nil {
		return "", err
	}
	bins, err := peers.BuildCommands(dir, peers.PkgTestUpstream)
	return bins[peers.PkgTestUpstream], err
})

// TestShutdownDrains: a call in flight when the gateway is told to stop
// (SIGTERM cancels the context Serve runs under) gets its answer, and its
// outcome is in the audit log.
func TestShutdownDrains(t *testing.T) {
	if testing.Short() {
		t.Skip("starts upstream processes")
	}
	up, err := testUpstream()
	if err != nil {
		t.Fatal(err)
	}
	plans, state := t.TempDir(), t.TempDir()
	writePlan(t, plans, "slow.hcl", fmt.Sprintf(`plan "slow" {
  goal  = "wait"
  order = "any"
  upstream {
    command = [%q]
  }
  step "wait" {
    tool = "slow"
    arg "ms" { max = 5000 }
  }
}
`, up))
	r := start(t, Config{PlansDir: plans, StateDir: state, Authenticators: []authn.Authenticator{tokenFile(t, map[string]string{"tok": "ops slow"})}})
	_, sid, _ := initialize(t, r.url+"/mcp/slow", "tok")
	post := func(body string) (int, string, error) {
		req, _ := http.NewRequest("POST", r.url+"/mcp/slow", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	if code, body, err := post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil || code != 202 {
		t.Fatalf("initialized: %d %s %v", code, body, err)
	}
	type answer struct {
		code int
		body string
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		code, body, err := post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{"ms":1500}}}`)
		done <- answer{code, body, err}
	}()
	audit := filepath.Join(stateOf(state, plans, "slow"), "audit.jsonl")
	waitFor(t, "the call to be allowed", func() bool {
		b, _ := os.ReadFile(audit)
		return strings.Contains(string(b), `"decision":"allow"`)
	})
	r.stop()
	a := <-done
	if a.err != nil || a.code != 200 || !strings.Contains(a.body, `"result"`) || strings.Contains(a.body, `"isError":true`) {
		t.Fatalf("the call in flight at shutdown got %d %q %v, want its result", a.code, a.body, a.err)
	}
	b, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"type":"outcome"`) || !strings.Contains(string(b), `"ok":true`) {
		t.Fatalf("audit log lacks the call's outcome:\n%s", b)
	}
}
