// Package bench measures what planlock's proxy costs on the call path, with a
// trivial Go upstream (internal/testkit/testupstream's echo tool):
//
//  1. direct: the client talks to the upstream;
//  2. passthrough: through bench/passthrough, a bare relay on the same
//     library (no policy, no state): the floor for one extra hop;
//  3. planlock: through planlock proxy with its state and audit log on (the
//     benchmark's step has a large budget, so it is counted in leases);
//  4. planlock-memstate: the same proxy with its state directory on a
//     memory filesystem (/dev/shm; skipped, saying why, without one): the
//     proxy's own cost without the disk's;
//  5. planlock-sync-each-call: the same as planlock with --sync-each-call,
//     one fdatasync per forwarded call (shared by concurrent calls);
//  6. the floor and the npm relays (relay_test.go): a line copier, a
//     copier with one JSON decode+encode per message and a copier that
//     appends and fdatasyncs each request before passing it on (stdio), and
//     mcp-proxy, supergateway and @civic/passthrough-mcp-server (HTTP).
//
// Each setup also reports cpu-µs/call, the CPU time its relay process (the
// upstream's, when direct) spent per call. Every transport is measured with
// a legacy client (initialize, protocol 2025-11-25: "stdio", "http") and
// with mcp-go v1.2.1's default client (protocol 2026-07-28, _meta on every
// request, no HTTP session: "stdio-modern", "http-modern"); the npm relays
// with the legacy one only.
//
// bench/run runs these with the other benchmarks of the repository and prints
// one table. By hand, from the repository root:
//
//	go test ./bench -run '^$' -bench 'Latency$/stdio' -benchtime 2000x
//
// BenchmarkLatency reports p50 and p99 latency (p50-µs, p99-µs) of one
// client's sequential calls to each setup, the setups of a transport
// interleaved in one run (see latency); BenchmarkThroughput16 calls/s with 16
// concurrent clients, each over stdio and streamable HTTP, one setup after
// another. BenchmarkGateway64
// (gateway_test.go) compares one planlock serve of 8 plans with 8 planlock
// proxy processes under 64 clients. BenchmarkFdatasync is the
// disk's floor for one durable record; cli_test.go compares plan fmt and plan
// validate with hclfmt. The gate's own check is BenchmarkCheck in proxy/gate.
//
// TestBenchRunQuick (build tag e2e, so in the test command) runs bench/run
// --quick and checks that every setup and target has its figures.
//
// PLANLOCK_BENCH_BIN names a directory holding testupstream, passthrough,
// planlock and hclfmt already built (bench/run builds them once); otherwise
// the first benchmark that runs one builds them.
package bench

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/planlock/planlock/internal/testkit/leakcheck"
	"github.com/planlock/planlock/internal/testkit/peers"
)

// The commands the benchmarks run, by name. PLANLOCK_BENCH_BIN names a
// directory holding them already built (bench/run builds them once);
// otherwise the first benchmark that needs one builds them all, so a run
// without -bench builds nothing.
var benchBins = map[string]string{
	"testupstream": peers.PkgTestUpstream,
	"passthrough":  peers.PkgPassthrough,
	"planlock":     peers.PkgPlanlock,
	"hclfmt":       "github.com/hashicorp/hcl/v2/cmd/hclfmt",
}

var (
	binDir   string // a temporary directory of TestMain's, removed at the end
	binOnce  sync.Once
	binPaths map[string]string
	binErr   error
)

// bin returns the path of the command name (a key of benchBins).
func bin(b testing.TB, name string) string {
	b.Helper()
	binOnce.Do(func() {
		if dir := os.Getenv("PLANLOCK_BENCH_BIN"); dir != "" {
			binPaths = map[string]string{}
			for n := range benchBins {
				binPaths[n] = filepath.Join(dir, n)
				if _, err := os.Stat(binPaths[n]); err != nil {
					binErr = fmt.Errorf("PLANLOCK_BENCH_BIN: %w", err)
					return
				}
			}
			return
		}
		pkgs := make([]string, 0, len(benchBins))
		for _, pkg := range benchBins {
			pkgs = append(pkgs, pkg)
		}
		built, err := peers.BuildCommands(binDir, pkgs...)
		if err != nil {
			binErr = err
			return
		}
		binPaths = map[string]string{}
		for n, pkg := range benchBins {
			binPaths[n] = built[pkg]
		}
	})
	if binErr != nil {
		b.Fatal(binErr)
	}
	return binPaths[name]
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "planlock-bench")
	if err != nil {
		panic(err)
	}
	binDir = dir
	// No process a benchmark or test started may outlive the run
	// (internal/testkit/leakcheck): the run fails naming it.
	if err := leakcheck.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := leakcheck.Check(leakcheck.Grace); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
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

// setup writes the plan and names a fresh state directory for a proxy of
// kind: on a memory filesystem for planlock-memstate (the benchmark is
// skipped, saying why, when there is none), beside the plan otherwise.
func setup(b *testing.B, kind string) (plan, state string) {
	b.Helper()
	dir := b.TempDir()
	plan = filepath.Join(dir, "plan.hcl")
	if err := os.WriteFile(plan, []byte(benchPlan), 0o644); err != nil {
		b.Fatal(err)
	}
	if kind != "planlock-memstate" {
		return plan, filepath.Join(dir, "state")
	}
	mem, err := memStateDir(memStateBase)
	if err != nil {
		// go test shows a benchmark's skip only with -v; bench/run keeps
		// stderr on the terminal, so the reason is seen there.
		fmt.Fprintf(os.Stderr, "%s skipped: %v\n", b.Name(), err)
		b.Skip(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(mem) })
	return plan, filepath.Join(mem, "state")
}

// stdioCommand is the command line of each setup, as the client starts it.
func stdioCommand(b *testing.B, kind string) []string {
	up := []string{bin(b, "testupstream")}
	switch kind {
	case "direct":
		return up
	case "passthrough":
		return append([]string{bin(b, "passthrough"), "--"}, up...)
	case "floor-lines", "floor-json", "floor-sync":
		return floorCommand(b, kind, up)
	default:
		plan, state := setup(b, kind)
		args := []string{bin(b, "planlock"), "proxy", "--plan", plan, "--insecure-skip-verify", "--state", state}
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

// connect starts a client on tr: a legacy one (initialize, protocol
// 2025-11-25), or with modern mcp-go v1.2.1's default client (no pinned
// version: server/discover, protocol 2026-07-28, _meta on every request),
// which must have negotiated that era.
func connect(b *testing.B, tr transport.Interface, modern bool) *client.Client {
	b.Helper()
	c := client.NewClient(tr)
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	if !modern {
		init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	}
	init.Params.ClientInfo = mcp.Implementation{Name: "bench", Version: "1"}
	res, err := c.Initialize(ctx, init)
	if err != nil {
		b.Fatal(err)
	}
	if modern && !mcp.IsModernProtocol(res.ProtocolVersion) {
		b.Fatalf("the default client negotiated protocol %s, not 2026-07-28", res.ProtocolVersion)
	}
	return c
}

// clientEra splits a transport as the benchmarks name it: "stdio" and
// "http" are measured with a legacy client, "stdio-modern" and
// "http-modern" with a modern one (connect).
func clientEra(tr string) (base string, modern bool) { return strings.CutSuffix(tr, "-modern") }

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

var kinds = []string{"direct", "passthrough", "planlock", "planlock-memstate", "planlock-sync-each-call"}

// dial connects one client to a fresh setup of kind over transport tr
// ("stdio" or "http"); pid is the relay's process (the upstream's when direct).
func dial(b *testing.B, tr, kind string) (c *client.Client, pid int) {
	b.Helper()
	tr, modern := clientEra(tr)
	if tr == "stdio" {
		cmd := stdioCommand(b, kind)
		var started *exec.Cmd
		c = connect(b, transport.NewStdioWithOptions(cmd[0], nil, cmd[1:],
			transport.WithCommandFunc(func(ctx context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
				started = exec.CommandContext(ctx, command, args...)
				started.Env = append(os.Environ(), env...)
				return started, nil
			})), modern)
		return c, started.Process.Pid
	}
	url, pid := serveHTTPProc(b, kind)
	t, err := transport.NewStreamableHTTP(url)
	if err != nil {
		b.Fatal(err)
	}
	return connect(b, t, modern), pid
}

// BenchmarkLatency is one client's sequential calls to every setup of a
// transport, interleaved: all setups run at once, and each round gives
// every setup, in a shuffled order, latencyBlock calls in turn, until each
// made b.N. A change of the machine's load during the run (2 shared cores
// here) then falls on every setup alike, so the ratios between setups hold
// even where the absolute figures drift. One line per transport carries
// each setup's figures as <setup>:<unit> (p50-µs, p99-µs, cpu-µs/call: the
// process's CPU over the whole run, its idle turns included, per call);
// bench/cmd/table reads them as Latency/<transport>/<setup>. Over stdio the
// rounds also time the disk: "fdatasync" is one 400-byte append and
// fdatasync after a call, as --sync-each-call makes them.
func BenchmarkLatency(b *testing.B) {
	for _, tr := range transports {
		b.Run(tr, func(b *testing.B) { latency(b, tr, kindsFor(tr)) })
	}
}

// latencyBlock is how many calls a setup makes in a row: enough that the
// switch to it costs little, few enough that every setup sees each part of
// the run.
const latencyBlock = 25

func latency(b *testing.B, tr string, kinds []string) {
	type setup struct {
		kind string
		call func() time.Duration // one call, and how long it took
		pid  int                  // 0: no process (the fdatasync floor)
		lat  []time.Duration
		cpu  cpuMeter
	}
	setups := make([]*setup, 0, len(kinds)+1)
	for _, kind := range kinds {
		c, pid := dial(b, tr, kind)
		defer c.Close()
		for range 50 { // warm up
			echo(b, c)
		}
		setups = append(setups, &setup{kind: kind, pid: pid, lat: make([]time.Duration, 0, b.N), call: func() time.Duration {
			start := time.Now()
			echo(b, c)
			return time.Since(start)
		}})
	}
	if tr == "stdio" {
		// The disk's floor for --sync-each-call, in the same rounds as the
		// calls (the disk's fdatasync drifts over minutes), and as a relay
		// meets it: one append and fdatasync after a call's worth of other
		// work (an untimed call to the upstream). Back to back, as
		// BenchmarkFdatasync makes them, this machine's virtual disk
		// answers each sooner than one that follows other work.
		c, _ := dial(b, tr, "direct")
		defer c.Close()
		sync := fdatasyncProbe(b)
		setups = append(setups, &setup{kind: "fdatasync", lat: make([]time.Duration, 0, b.N), call: func() time.Duration {
			echo(b, c)
			start := time.Now()
			sync()
			return time.Since(start)
		}})
	}
	for _, s := range setups {
		if s.pid != 0 {
			s.cpu = startCPU(b, s.pid)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2)) // the same order in every run
	b.ResetTimer()
	for done := 0; done < b.N; done += latencyBlock {
		n := min(latencyBlock, b.N-done)
		for _, i := range rng.Perm(len(setups)) {
			s := setups[i]
			for range n {
				s.lat = append(s.lat, s.call())
			}
		}
	}
	b.StopTimer()
	for _, s := range setups {
		if v, ok := s.cpu.perCall(b, b.N); s.pid != 0 && ok {
			b.ReportMetric(v, s.kind+":cpu-µs/call")
		}
		slices.Sort(s.lat)
		b.ReportMetric(float64(s.lat[len(s.lat)/2].Nanoseconds())/1e3, s.kind+":p50-µs")
		b.ReportMetric(float64(s.lat[len(s.lat)*99/100].Nanoseconds())/1e3, s.kind+":p99-µs")
	}
}

// serveHTTPProc starts a setup over streamable HTTP and returns its URL
// and the relay's process id (the upstream's when direct).
func serveHTTPProc(b *testing.B, kind string) (url string, pid int) {
	b.Helper()
	if isNPMPeer(kind) {
		return servePeer(b, kind)
	}
	switch kind {
	case "direct":
		return startURLProc(b, bin(b, "testupstream"), "--http", "127.0.0.1:0")
	case "passthrough":
		return startURLProc(b, bin(b, "passthrough"), "--http", "127.0.0.1:0", "--", bin(b, "testupstream"))
	default:
		plan, state := setup(b, kind)
		args := append([]string{"proxy", "--plan", plan, "--insecure-skip-verify", "--state", state, "--listen", "127.0.0.1:0"}, proxyFlags(kind)...)
		return startURLProc(b, bin(b, "planlock"), append(args, "--", bin(b, "testupstream"))...)
	}
}

var urlRE = regexp.MustCompile(`(http://\S+/mcp)`)

func startURL(b *testing.B, name string, args ...string) string {
	url, _ := startURLProc(b, name, args...)
	return url
}

func startURLProc(b *testing.B, name string, args ...string) (string, int) {
	b.Helper()
	cmd := exec.Command(name, args...)
	leakcheck.OwnGroup(cmd) // the relay's upstream goes with it
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		leakcheck.KillGroup(cmd)
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := urlRE.FindStringSubmatch(sc.Text()); m != nil {
			go func() {
				for sc.Scan() {
				}
			}()
			return m[1], cmd.Process.Pid
		}
	}
	b.Fatalf("%s printed no URL", name)
	return "", 0
}

// transports are the transports the benchmarks measure, each with a
// legacy client and a modern one (clientEra).
var transports = []string{"stdio", "http", "stdio-modern", "http-modern"}

// BenchmarkThroughput16 is 16 clients calling at once. Over HTTP each client
// has its own session (a modern client has none: each request stands
// alone); over stdio there is one pipe (one agent process), so the 16 share
// one session with calls in flight concurrently.
func BenchmarkThroughput16(b *testing.B) { throughput(b, 16, transports...) }

// throughput is clients clients calling at once over each transport of trs.
func throughput(b *testing.B, clients int, trs ...string) {
	for _, tr := range trs {
		for _, kind := range kindsFor(tr) {
			b.Run(tr+"/"+kind, func(b *testing.B) {
				cs := make([]*client.Client, clients)
				var pid int
				if base, modern := clientEra(tr); base == "stdio" {
					var c *client.Client
					c, pid = dial(b, tr, kind)
					defer c.Close()
					for i := range cs {
						cs[i] = c
					}
				} else {
					var url string
					url, pid = serveHTTPProc(b, kind)
					for i := range cs {
						t, err := transport.NewStreamableHTTP(url)
						if err != nil {
							b.Fatal(err)
						}
						cs[i] = connect(b, t, modern)
						defer cs[i].Close()
					}
				}
				for _, c := range cs { // warm up
					echo(b, c)
				}
				cpu := startCPU(b, pid)
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
				cpu.report(b, per*clients)
			})
		}
	}
}
