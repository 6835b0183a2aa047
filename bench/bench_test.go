// Package bench measures what planlock's proxy costs on the call path, with a
// trivial Go upstream (internal/testupstream's echo tool):
//
//  1. direct: the client talks to the upstream;
//  2. passthrough: through bench/passthrough, a bare relay on the same
//     library (no policy, no state): the floor for one extra hop;
//  3. planlock: through planlock proxy with its state and audit log on.
//
// Run from the repository root:
//
//	go test ./bench -run '^$' -bench . -benchtime 2000x
//
// BenchmarkStdioLatency reports p50 latency (p50-µs) of sequential calls over
// stdio; BenchmarkHTTPThroughput reports calls/s with 16 concurrent clients
// over streamable HTTP. The gate's own check is BenchmarkCheck in proxy/gate.
package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	dir, err := os.MkdirTemp("", "planlock-bench")
	if err != nil {
		panic(err)
	}
	for name, pkg := range map[string]string{
		"testupstream": "internal/testupstream/cmd/testupstream",
		"passthrough":  "bench/passthrough",
		"planlock":     "cmd/planlock",
	} {
		bin[name] = filepath.Join(dir, name)
		if out, err := exec.Command("go", "build", "-o", bin[name], "github.com/planlock/planlock/"+pkg).CombinedOutput(); err != nil {
			panic(fmt.Sprintf("build %s: %v\n%s", pkg, err, out))
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
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
		return append([]string{bin["planlock"], "proxy", "--plan", plan, "--insecure-skip-verify", "--state", state, "--"}, up...)
	}
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

func echo(b *testing.B, c *client.Client) {
	req := mcp.CallToolRequest{}
	req.Params.Name = "echo"
	req.Params.Arguments = map[string]any{"message": "hello"}
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		b.Fatal(err)
	}
	if res.IsError {
		b.Fatalf("echo failed: %+v", res.Content)
	}
}

func BenchmarkStdioLatency(b *testing.B) {
	for _, kind := range []string{"direct", "passthrough", "planlock"} {
		b.Run(kind, func(b *testing.B) {
			cmd := stdioCommand(b, kind)
			c := connect(b, transport.NewStdio(cmd[0], nil, cmd[1:]...))
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
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
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
		return startURL(b, bin["planlock"], "proxy", "--plan", plan, "--insecure-skip-verify", "--state", state,
			"--listen", "127.0.0.1:0", "--", bin["testupstream"])
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

func BenchmarkHTTPThroughput(b *testing.B) {
	const clients = 16
	for _, kind := range []string{"direct", "passthrough", "planlock"} {
		b.Run(kind, func(b *testing.B) {
			url := serveHTTP(b, kind)
			cs := make([]*client.Client, clients)
			for i := range cs {
				tr, err := transport.NewStreamableHTTP(url)
				if err != nil {
					b.Fatal(err)
				}
				cs[i] = connect(b, tr)
				defer cs[i].Close()
				echo(b, cs[i])
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
