//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planlock/planlock/internal/testkit/pgtest"
)

const multiRoundReplicaPlan = `
plan "mr-replicas" {
  goal  = "multi-round calls across replicas"
  order = "any"
  step "ask" {
    tool      = "ask"
    max_calls = 1
    arg "resultType" { max_length = 20 }
    input {
      elicitation {
        field "password" {
          type       = "string"
          max_length = 16
        }
      }
    }
  }
}
`

// modernCall posts one stateless 2026-07-28 request, as a modern client
// that can answer forms does, and returns its JSON-RPC response.
func modernCall(t *testing.T, url, method string, params map[string]any) map[string]any {
	t.Helper()
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "e2e", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}},
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if n, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", n)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<22)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]any
				if json.Unmarshal([]byte(d), &m) == nil && m["id"] != nil {
					out = m
				}
			}
		}
	} else if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s: %v (HTTP %d)", method, err, resp.StatusCode)
	}
	if out == nil {
		t.Fatalf("%s: no response (HTTP %d)", method, resp.StatusCode)
	}
	return out
}

// TestMultiRoundRetryOnAnotherReplica: replicas of one PostgreSQL state
// with one state key verify each other's requestState, so a multi-round
// call's retry may land on another replica: it completes there, the call
// counted once (max_calls = 1); the same state replayed there is refused. Replicas without a state key each have their own key, and a
// retry on the other is refused, not forwarded.
func TestMultiRoundRetryOnAnotherReplica(t *testing.T) {
	t.Parallel()
	for _, keyed := range []bool{true, false} {
		name := map[bool]string{true: "state key", false: "no state key"}[keyed]
		t.Run(name, func(t *testing.T) {
			cl := pgtest.Start(t)
			e := &replicaEnv{t: t, cluster: cl, db: cl.NewDatabase(t), plan: writePlan(t, multiRoundReplicaPlan), root: t.TempDir()}
			if out, err := exec.Command(planlockBin, "state", "migrate", "--state", e.db).CombinedOutput(); err != nil {
				t.Fatalf("planlock state migrate: %v\n%s", err, out)
			}
			e.callsLog = filepath.Join(t.TempDir(), "calls.jsonl")
			e.upURL = startLogged(t, nil, `(http://\S+/mcp)`, testUpstreamBin, "--http", "127.0.0.1:0", "--mode", "multi-round", "--calls-log", e.callsLog)
			if keyed {
				key := make([]byte, 32)
				_, _ = rand.Read(key)
				kf := filepath.Join(t.TempDir(), "state.key")
				if err := os.WriteFile(kf, key, 0o600); err != nil {
					t.Fatal(err)
				}
				e.extra = []string{"--state-key", kf}
			}
			a := e.start()
			// Each replica has its own local files (and so, without a state
			// key, its own multi-round key), as on two machines.
			e.root = t.TempDir()
			b := e.start()
			args := map[string]any{"resultType": "elicit"}
			first := modernCall(t, a.url, "tools/call", map[string]any{"name": "ask", "arguments": args})
			res, _ := first["result"].(map[string]any)
			state, _ := res["requestState"].(string)
			if res["resultType"] != "input_required" || !strings.HasPrefix(state, "planlock.1.") {
				t.Fatalf("first round: %v", first)
			}
			answers := map[string]any{"password": map[string]any{"action": "accept", "content": map[string]any{"password": "hunter2"}}}
			retry := func(r *replica) map[string]any {
				return modernCall(t, r.url, "tools/call", map[string]any{"name": "ask", "arguments": args, "inputResponses": answers, "requestState": state})
			}
			got := retry(b)
			text, _ := json.Marshal(got)
			if !keyed {
				if !strings.Contains(string(text), "the requestState does not verify") {
					t.Fatalf("a retry on a replica with another key: %s", text)
				}
				if calls := loggedCalls(t, e.callsLog); len(calls) != 1 {
					t.Errorf("the upstream got %d requests, want the first round only", len(calls))
				}
				return
			}
			if !strings.Contains(string(text), `state upstream-state-1; answers {\"password\":{\"action\":\"accept\",\"content\":{\"password\":\"hunter2\"}}}`) {
				t.Fatalf("the retry on the other replica: %s", text)
			}
			// A round is answered once in the shared state: the replayed
			// state is refused by the replica that took it and by the one
			// that issued it, which never saw it used.
			for _, r := range []*replica{b, a} {
				if again, _ := json.Marshal(retry(r)); !strings.Contains(string(again), "the requestState was used already") {
					t.Errorf("the state replayed on replica %s: %s", r.url, again)
				}
			}
			if calls := loggedCalls(t, e.callsLog); len(calls) != 2 {
				t.Errorf("the upstream got %d requests, want 2", len(calls))
			}
			// Counted once: a new call is over max_calls = 1.
			if over, _ := json.Marshal(modernCall(t, b.url, "tools/call", map[string]any{"name": "ask", "arguments": args})); !strings.Contains(string(over), "max_calls") {
				t.Errorf("a second call: %s", over)
			}
		})
	}
}
