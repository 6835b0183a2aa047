// Package bench measures what planlock's proxy costs on the call path, with a
// trivial Go upstream (internal/testupstream's echo tool):
//
//  1. direct: the client talks to the upstream;
//  2. passthrough: through bench/passthrough, a bare relay on the same
//     library (no policy, no state): the floor for one extra hop;
//  3. planlock: through planlock proxy with its state and audit log on (the
//     benchmark's step has a large budget, so it is counted in leases);
//  4. planlock-sync-each-call: the same with --sync-each-call, one
//     fdatasync per forwarded call (shared by concurrent calls).
//
// bench/run runs these with the other benchmarks of the repository and prints
// one table. By hand, from the repository root:
//
//	go test ./bench -run '^$' -bench Latency -benchtime 2000x
//
// BenchmarkLatency reports p50 and p99 latency (p50-µs, p99-µs) of one
// client's sequential calls, BenchmarkThroughput16 calls/s with 16 concurrent
// clients, each over stdio and streamable HTTP. BenchmarkGateway64
// (gateway_test.go) compares one planlock serve of 8 plans with 8 planlock
// proxy processes under 64 clients. BenchmarkFdatasync is the
// disk's floor for one durable record; cli_test.go compares plan fmt and plan
// validate with hclfmt. The gate's own check is BenchmarkCheck in proxy/gate.
//
// PLANLOCK_BENCH_BIN names a directory holding testupstream, passthrough,
// planlock and hclfmt already built (bench/run builds them once); otherwise
// TestMain builds them.
package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

var bin = map[string]string{}

func TestMain(m *testing.M) {
	dir := os.Getenv("PLANLOCK_BENCH_BIN")
	prebuilt := dir != ""
	if !prebuilt {
		var err error
		if dir, err = os.MkdirTemp("", "planlock-bench"); err != nil {
			panic(err)
		}
	}
	for name, pkg := range map[string]string{
		"testupstream": "github.com/planlock/planlock/internal/testupstream/cmd/testupstream",
		"passthrough":  "github.com/planlock/planlock/bench/passthrough",
		"planlock":     "github.com/planlock/planlock/cmd/planlock",
		"hclfmt":       "github.com/hashicorp/hcl/v2/cmd/hclfmt",
	} {
		bin[name] = filepath.Join(dir, name)
		if prebuilt {
			if _, err := os.Stat(bin[name]); err != nil {
				panic(fmt.Sprintf("PLANLOCK_BENCH_BIN: %v", err))
			}
			continue
		}
		if out, err := exec.Command("go", "build", "-o", bin[name], pkg).CombinedOutput(); err != nil {
			panic(fmt.Sprintf("build %s: %v\n%s", pkg, err, out))
		}
	}
	code := m.Run()
	if !prebuilt {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

const benchPlan = `
plan "bench" {
  goal  = "echo as often as the benchmark wants"
  order = "any"
  step "echo" {
    tool      = "echo"
    max_calls = 1000000000
    arg "message" { max_length = 100 }
  }
}
`

// setup writes the plan and a fresh state directory.
func setup(b *testing.B) (plan, state string) {
	b.Helper()
	dir := b.TempDir()
	plan = filepath.Join(dir, "plan.hcl")
	if err := os.WriteFile(plan, []byte(benchPlan), 0o644); err != nil {
		b.Fatal(err)
	}
	return plan, filepath.Join(dir, "state")
}

// stdioCommand is the command line of each setup, as the client starts it.
func stdioCommand(b *testing.B, kind string) []string {
	up := []string{bin["testupstream"]}
	switch kind {
	case "direct":
		return up
	case "passthrough":
		return append([]string{bin["passthrough"], "--"}, up...)
	default:
		plan, state := setup(b)
		args := []string{bin["planlock"], "proxy", "--plan", plan, "--insecure-skip-verify", "--state", state}
		return append(append(args, proxyFlags(kind)...), append([]string{"--"}, up...)...)
	}
}

// proxyFlags are the proxy's extra flags for a kind of setup.
func proxyFlags(kind string) []string {
	if kind == "planlock-sync-each-call" {
		return []string{"--sync-each-call"}
	}
	return nil
}

func connect(b *testing.B, tr transport.Interface) *client.Client {
	b.Helper()
	c := client.NewClient(tr)
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "bench", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		b.Fatal(err)
	}
	return c
}

// echo makes one call; it reports a failure with Error (it also runs on
// goroutines of its own) and stops the calling goroutine.
func echo(b *testing.B, c *client.Client) {
	req := mcp.CallToolRequest{}
	req.Params.Name = "echo"
	req.Params.Arguments = map[string]any{"message": "hello"}
	res, err := c.CallTool(context.Background(), req)
	if err == nil && res.IsError {
		err = fmt.Errorf("echo failed: %+v", res.Content)
	}
	if err != nil {
		b.Error(err)
		runtime.Goexit()
	}
}

var kinds = []string{"direct", "passthrough", "planlock", "planlock-sync-each-call"}

// dial connects one client to a fresh setup of kind over transport tr
// ("stdio" or "http").
func dial(b *testing.B, tr, kind string) *client.Client {
	b.Helper()
	if tr == "stdio" {
		cmd := stdioCommand(b, kind)
		return connect(b, transport.NewStdio(cmd[0], nil, cmd[1:]...))
	}
	t, err := transport.NewStreamableHTTP(serveHTTP(b, kind))
	if err != nil {
		b.Fatal(err)
	}
	return connect(b, t)
}

// BenchmarkLatency is one client's sequential calls.
func BenchmarkLatency(b *testing.B) {
	for _, tr := range []string{"stdio", "http"} {
		for _, kind := range kinds {
			b.Run(tr+"/"+kind, func(b *testing.B) {
				c := dial(b, tr, kind)
				defer c.Close()
				for range 50 { // warm up
					echo(b, c)
				}
				lat := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for range b.N {
					start := time.Now()
					echo(b, c)
					lat = append(lat, time.Since(start))
				}
				b.StopTimer()
				sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
				b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
			})
		}
	}
}

// serveHTTP starts a setup over streamable HTTP and returns its URL.
func serveHTTP(b *testing.B, kind string) string {
	b.Helper()
	up := startURL(b, bin["testupstream"], "--http", "127.0.0.1:0")
	switch kind {
	case "direct":
		return up
	case "passthrough":
		return startURL(b, bin["passthrough"], "--http", "127.0.0.1:0", "--", bin["testupstream"])
	default:
		plan, state := setup(b)
		args := append([]string{"proxy", "--plan", plan, "--insecure-skip-verify", "--state", state, "--listen", "127.0.0.1:0"}, proxyFlags(kind)...)
		return startURL(b, bin["planlock"], append(args, "--", bin["testupstream"])...)
	}
}

var urlRE = regexp.MustCompile(`(http://\S+/mcp)`)

func startURL(b *testing.B, name string, args ...string) string {
	b.Helper()
	cmd := exec.Command(name, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := urlRE.FindStringSubmatch(sc.Text()); m != nil {
			go func() {
				for sc.Scan() {
				}
			}()
			return m[1]
		}
	}
	b.Fatalf("%s printed no URL", name)
	return ""
}

// BenchmarkThroughput16 is 16 clients calling at once. Over HTTP each client
// has its own session; over stdio there is one pipe (one agent process), so
// the 16 share one session with calls in flight concurrently.
func BenchmarkThroughput16(b *testing.B) {
	const clients = 16
	for _, tr := range []string{"stdio", "http"} {
		for _, kind := range kinds {
			b.Run(tr+"/"+kind, func(b *testing.B) {
				cs := make([]*client.Client, clients)
				if tr == "stdio" {
					c := dial(b, tr, kind)
					defer c.Close()
					for i := range cs {
						cs[i] = c
					}
				} else {
					url := serveHTTP(b, kind)
					for i := range cs {
						t, err := transport.NewStreamableHTTP(url)
						if err != nil {
							b.Fatal(err)
						}
						cs[i] = connect(b, t)
						defer cs[i].Close()
					}
				}
				for _, c := range cs { // warm up
					echo(b, c)
				}
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				per := (b.N + clients - 1) / clients
				for _, c := range cs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range per {
							echo(b, c)
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(float64(per*clients)/time.Since(start).Seconds(), "calls/s")
			})
		}
	}
}
