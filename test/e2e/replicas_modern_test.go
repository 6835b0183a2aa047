//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/planlock/planlock/internal/testkit/peers"
)

const modernReplicaPlan = `
plan "modern-replicas" {
  goal  = "count exactly across replicas, stateless clients"
  order = "any"
  step "once" {
    tool      = "echo"
    max_calls = 1
    arg "message" { pattern = "^once[0-9]+$" }
  }
  step "go" {
    tool      = "echo"
    max_calls = 40
    arg "message" { pattern = "^go[0-9]+$" }
  }
  step "ts" {
    tool      = "echo"
    max_calls = 7
    arg "message" { pattern = "^ts[0-9]+$" }
  }
}
`

// roundRobin sends every request to the next replica, whatever it carries
// (no stickiness at all), and counts what each replica served: requests, tool
// calls, and anything of the session era (a session id, initialize).
type roundRobin struct {
	backends []*url.URL
	next     atomic.Uint64
	requests []atomic.Int64
	calls    []atomic.Int64
	mu       sync.Mutex
	legacy   []string // session-era traits seen, one line each
}

func (lb *roundRobin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i := int(lb.next.Add(1) % uint64(len(lb.backends)))
	lb.requests[i].Add(1)
	if r.Header.Get("Mcp-Method") == "tools/call" {
		lb.calls[i].Add(1)
	}
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" || r.Header.Get("Mcp-Method") == "initialize" || r.Method != http.MethodPost {
		lb.mu.Lock()
		lb.legacy = append(lb.legacy, fmt.Sprintf("%s %s session %q version %q", r.Method, r.Header.Get("Mcp-Method"), sid, r.Header.Get("Mcp-Protocol-Version")))
		lb.mu.Unlock()
	}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(lb.backends[i]); pr.Out.URL.Path = pr.In.URL.Path },
		FlushInterval: -1,
	}
	rp.ServeHTTP(w, r)
}

func startRoundRobin(t *testing.T, reps []*replica) (*roundRobin, string) {
	t.Helper()
	lb := &roundRobin{requests: make([]atomic.Int64, len(reps)), calls: make([]atomic.Int64, len(reps))}
	for _, r := range reps {
		u, err := url.Parse(r.url)
		if err != nil {
			t.Fatal(err)
		}
		u.Path = ""
		lb.backends = append(lb.backends, u)
	}
	srv := httptest.NewServer(lb)
	t.Cleanup(srv.Close)
	return lb, srv.URL + "/mcp"
}

// stateAudit exports the PostgreSQL state's audit chain (verified whole).
func (e *replicaEnv) stateAudit() []map[string]any {
	e.t.Helper()
	out, err := exec.Command(planlockBin, "audit", "export", "--state", e.db).Output()
	if err != nil {
		e.t.Fatalf("planlock audit export --state: %v", err)
	}
	var recs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			e.t.Fatalf("audit export line %q: %v", l, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// TestReplicasModernClientsRoundRobin: three proxy replicas on one
// PostgreSQL state behind a front that sends each request to the next
// replica, with no stickiness. Modern (2026-07-28) clients are stateless, so
// any replica serves any request: mcp-go v1.2.1's default client and the
// TypeScript SDK v2 client pinned to 2026-07-28 race for steps of
// max_calls 1, 40 and 7, and exactly that many calls reach the upstream, are
// counted, and are audited (one allow and one outcome each, one block per
// refusal).
func TestReplicasModernClientsRoundRobin(t *testing.T) {
	peers.Node(t)
	e := newReplicaEnvPlan(t, modernReplicaPlan)
	reps := []*replica{e.start(), e.start(), e.start()}
	lb, front := startRoundRobin(t, reps)
	ctx := context.Background()

	// mcp-go's default client: 60 parallel calls of a max_calls = 1 step
	// from 12 clients.
	var once tally
	load(ctx, t, []string{front}, 12, "once", 60, nil, true, &once)
	// Then 100 calls of a max_calls = 40 step.
	var gocalls tally
	load(ctx, t, []string{front}, 12, "go", 100, nil, true, &gocalls)

	// The TypeScript SDK v2 client, pinned to 2026-07-28: three agents,
	// ten parallel calls each, of a max_calls = 7 step.
	tsAllowed, tsRefused := 0, 0
	var mu sync.Mutex
	var wg sync.WaitGroup
	for a := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var steps []peers.Step
			for i := range 10 {
				steps = append(steps, peers.CallTool("echo", map[string]any{"message": fmt.Sprintf("ts%d", a*100+i)}))
			}
			target := peers.HTTP(front, "")
			target.Negotiation = "2026-07-28"
			tr := peers.RunAgent(t, target, peers.Script{Steps: []peers.Step{peers.Parallel(steps...)}})
			if !tr.Connect.OK || tr.Connect.Era != "modern" {
				t.Errorf("agent %d connect: ok %v era %q\n%s", a, tr.Connect.OK, tr.Connect.Era, tr)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, r := range tr.Results {
				switch {
				case r.Op == "parallel" && r.OK:
				case r.Op != "callTool":
					t.Errorf("agent %d step: %+v", a, r)
				case r.OK && !r.IsError:
					tsAllowed++
				case r.OK && strings.Contains(r.Text, "max_calls 7 used up"):
					tsRefused++
				default:
					t.Errorf("agent %d call: %+v", a, r)
				}
			}
		}()
	}
	wg.Wait()

	t.Logf("once: %d allowed %d refused %d failed; go: %d allowed %d refused %d failed; ts: %d allowed %d refused",
		once.allowed.Load(), once.refused.Load(), once.failed.Load(),
		gocalls.allowed.Load(), gocalls.refused.Load(), gocalls.failed.Load(), tsAllowed, tsRefused)
	for i := range reps {
		t.Logf("replica %d served %d requests, %d tool calls", i, lb.requests[i].Load(), lb.calls[i].Load())
		if lb.calls[i].Load() == 0 {
			t.Errorf("replica %d served no tool call: the front did not spread them", i)
		}
	}
	if len(lb.legacy) > 0 {
		t.Errorf("modern clients sent session-era requests: %v", lb.legacy)
	}
	want := []struct {
		step             string
		allowed, refused int64
		got              *tally
	}{
		{"once", 1, 59, &once},
		{"go", 40, 60, &gocalls},
		{"ts", 7, 23, &tally{}},
	}
	want[2].got.allowed.Store(int64(tsAllowed))
	want[2].got.refused.Store(int64(tsRefused))
	for _, w := range want {
		if a, r, f := w.got.allowed.Load(), w.got.refused.Load(), w.got.failed.Load(); a != w.allowed || r != w.refused || f != 0 {
			t.Errorf("step %s: %d allowed, %d refused, %d failed; want %d and %d", w.step, a, r, f, w.allowed, w.refused)
		}
	}

	// Stopped, the replicas return their unused leases: then the counts,
	// the upstream's log and the audit chain agree exactly.
	for _, r := range reps {
		r.stop()
	}
	e.verify()
	recs := e.stateAudit()
	allows := map[string]int64{}
	blocks := map[string]int64{}
	allowSeq := map[float64]string{}
	outcomes := map[string]int64{}
	for _, r := range recs {
		if r["type"] != "decision" {
			continue
		}
		step, _ := r["step"].(string)
		switch r["decision"] {
		case "allow":
			allows[step]++
			allowSeq[r["seq"].(float64)] = step
		case "block":
			blocks[step]++
		}
	}
	for _, r := range recs {
		if r["type"] == "outcome" {
			ref, _ := r["ref"].(float64)
			outcomes[allowSeq[ref]]++
		}
	}
	for i, w := range want {
		if up := e.upstreamCount(w.step); int64(up) != w.allowed {
			t.Errorf("step %s: the upstream received %d calls, want %d", w.step, up, w.allowed)
		}
		if n := e.counted(i); int64(n) != w.allowed {
			t.Errorf("step %s: the state counted %d, want %d", w.step, n, w.allowed)
		}
		if allows[w.step] != w.allowed || outcomes[w.step] != w.allowed || blocks[w.step] != w.refused {
			t.Errorf("step %s audited: %d allow, %d outcome, %d block; want %d, %d, %d",
				w.step, allows[w.step], outcomes[w.step], blocks[w.step], w.allowed, w.allowed, w.refused)
		}
	}
}
