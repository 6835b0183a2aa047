package bench

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
)

// BenchmarkGateway64 is 64 HTTP clients spread over 8 plans (8 each), every
// plan with its own stdio test upstream and state:
//
//   - solo: one plan alone behind planlock proxy, its 8 clients only (the
//     p99 a plan has when nothing else runs);
//   - proxies: 8 planlock proxy processes, one per plan;
//   - serve: one planlock serve with the 8 plans.
//
// It reports calls/s over all clients and the worst plan's p99 (p99-max-µs).
// Each client is its own agent: its own HTTP connection pool.
func BenchmarkGateway64(b *testing.B) {
	const plans, perPlan = 8, 8
	for _, kind := range []string{"solo", "proxies", "serve"} {
		b.Run(kind, func(b *testing.B) {
			n := plans
			if kind == "solo" {
				n = 1
			}
			urls, token := gatewaySetup(b, kind, n)
			type agent struct {
				c    *client.Client
				plan int
			}
			var agents []agent
			for p := range n {
				for range perPlan {
					agents = append(agents, agent{c: dialGateway(b, urls[p], token), plan: p})
				}
			}
			defer func() {
				for _, a := range agents {
					a.c.Close()
				}
			}()
			for _, a := range agents { // warm up: every upstream started
				echo(b, a.c)
			}
			per := (b.N + len(agents) - 1) / len(agents)
			lat := make([][]time.Duration, len(agents))
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for i, a := range agents {
				lat[i] = make([]time.Duration, 0, per)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range per {
						t := time.Now()
						echo(b, a.c)
						lat[i] = append(lat[i], time.Since(t))
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			byPlan := make([][]time.Duration, n)
			for i, a := range agents {
				byPlan[a.plan] = append(byPlan[a.plan], lat[i]...)
			}
			var worst, best time.Duration
			for p, l := range byPlan {
				sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
				p99 := l[len(l)*99/100]
				if p == 0 || p99 > worst {
					worst = p99
				}
				if p == 0 || p99 < best {
					best = p99
				}
			}
			b.ReportMetric(float64(per*len(agents))/elapsed.Seconds(), "calls/s")
			b.ReportMetric(float64(worst.Nanoseconds())/1e3, "p99-max-µs")
			b.ReportMetric(float64(best.Nanoseconds())/1e3, "p99-min-µs")
		})
	}
}

// gatewaySetup starts n plans as kind ("solo" and "proxies": one planlock
// proxy each; "serve": one planlock serve) and returns each plan's URL and
// the bearer token.
func gatewaySetup(b *testing.B, kind string, n int) ([]string, string) {
	b.Helper()
	dir := b.TempDir()
	plansDir := filepath.Join(dir, "plans")
	if err := os.Mkdir(plansDir, 0o755); err != nil {
		b.Fatal(err)
	}
	var files []string
	for p := range n {
		name := fmt.Sprintf("bench%d", p)
		plan := strings.Replace(benchPlan, `plan "bench" {`, fmt.Sprintf("plan %q {\n  upstream {\n    command = [%q]\n  }", name, bin(b, "testupstream")), 1)
		f := filepath.Join(plansDir, name+".hcl")
		if err := os.WriteFile(f, []byte(plan), 0o644); err != nil {
			b.Fatal(err)
		}
		files = append(files, f)
	}
	const token = "bench-token"
	var urls []string
	if kind != "serve" {
		for _, f := range files {
			u := startURL(b, bin(b, "planlock"), "proxy", "--plan", f, "--insecure-skip-verify", "--state", filepath.Join(dir, "state", filepath.Base(f)),
				"--listen", "127.0.0.1:0")
			urls = append(urls, u)
		}
		return urls, ""
	}
	sum := sha256.Sum256([]byte(token))
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("sha256:"+hex.EncodeToString(sum[:])+" bench *\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	base := startURL(b, bin(b, "planlock"), "serve", "--plans", plansDir, "--insecure-skip-verify", "--tokens", tokens,
		"--state", filepath.Join(dir, "state"), "--listen", "127.0.0.1:0")
	for p := range n {
		urls = append(urls, fmt.Sprintf("%s/bench%d", base, p))
	}
	return urls, token
}

// dialGateway connects one agent with its own connection pool.
func dialGateway(b *testing.B, url, token string) *client.Client {
	b.Helper()
	opts := []transport.StreamableHTTPCOption{transport.WithHTTPBasicClient(&http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()})}
	if token != "" {
		opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	}
	t, err := transport.NewStreamableHTTP(url, opts...)
	if err != nil {
		b.Fatal(err)
	}
	return connect(b, t, false)
}
