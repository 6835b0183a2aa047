package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/planlock/planlock/internal/testkit/leakcheck"
)

// The relay's neighbours in the same run: below it the floor (bench/passthrough
// --floor: a line copier, the copier with one JSON decode and encode per
// message, and the copier that appends and fdatasyncs each request before
// passing it on; stdio only), beside it the relays people install from npm (HTTP;
// PLANLOCK_BENCH_NPM names the directory bench/run installed them into, and
// without it they are left out).

// npmPeers are the npm relays, by the name their rows carry.
var npmPeers = []string{"mcp-proxy", "supergateway", "civic-passthrough"}

func isNPMPeer(kind string) bool { return slices.Contains(npmPeers, kind) }

// kindsFor lists the setups measured over transport tr.
func kindsFor(tr string) []string {
	ks := slices.Clone(kinds)
	tr, modern := clientEra(tr)
	if tr == "stdio" {
		return append(ks, "floor-lines", "floor-json", "floor-sync")
	}
	// The npm relays are measured with the legacy client only: their
	// pinned versions predate protocol 2026-07-28.
	if !modern && os.Getenv("PLANLOCK_BENCH_NPM") != "" {
		ks = append(ks, npmPeers...)
	}
	return ks
}

func floorCommand(b testing.TB, kind string, up []string) []string {
	args := []string{bin(b, "passthrough"), "--floor", strings.TrimPrefix(kind, "floor-")}
	if kind == "floor-sync" { // its journal where the proxies keep their state
		args = append(args, "--floor-journal", filepath.Join(b.TempDir(), "journal"))
	}
	return append(append(args, "--"), up...)
}

// servePeer starts an npm relay over streamable HTTP in front of the test
// upstream and returns its URL and process id.
func servePeer(b *testing.B, kind string) (string, int) {
	b.Helper()
	dir := filepath.Join(os.Getenv("PLANLOCK_BENCH_NPM"), "node_modules")
	port := freePort(b)
	var cmd *exec.Cmd
	switch kind {
	case "mcp-proxy": // stdio upstream
		cmd = exec.Command(filepath.Join(dir, ".bin", "mcp-proxy"), "--host", "127.0.0.1", "--port", port,
			"--server", "stream", "--", bin(b, "testupstream"))
	case "supergateway": // stdio upstream, one session per client
		cmd = exec.Command(filepath.Join(dir, ".bin", "supergateway"), "--stdio", bin(b, "testupstream"),
			"--outputTransport", "streamableHttp", "--stateful", "--port", port, "--logLevel", "none")
	case "civic-passthrough": // HTTP to HTTP only
		up := startURL(b, bin(b, "testupstream"), "--http", "127.0.0.1:0")
		// Run by path: its entry point starts only when argv[1] is its own file;
		// it adds /mcp to the target URL itself.
		cmd = exec.Command("node", filepath.Join(dir, "@civic", "passthrough-mcp-server", "dist", "cli.js"))
		cmd.Env = append(os.Environ(), "PORT="+port, "TARGET_SERVER_URL="+strings.TrimSuffix(up, "/mcp"), "TARGET_SERVER_TRANSPORT=httpStream")
	default:
		b.Fatalf("no npm peer %q", kind)
	}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	// The relay's stdio upstreams (one per session for supergateway, under
	// a shell) go with it.
	leakcheck.OwnGroup(cmd)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		leakcheck.KillGroup(cmd)
		_ = cmd.Wait()
	})
	addr := net.JoinHostPort("127.0.0.1", port)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s did not listen on %s: %s", kind, addr, logs.String())
		}
	}
	return "http://" + addr + "/mcp", cmd.Process.Pid
}

func freePort(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// cpuMeter measures the CPU time (user and system, all threads) one process
// spends while a benchmark runs.
type cpuMeter struct {
	pid   int
	start time.Duration
	ok    bool
}

func startCPU(b *testing.B, pid int) cpuMeter {
	t, err := processCPU(pid)
	if err != nil {
		b.Logf("cpu per call not measured: %v", err)
	}
	return cpuMeter{pid: pid, start: t, ok: err == nil}
}

// report adds cpu-µs/call: the process's CPU time since start per call.
func (m cpuMeter) report(b *testing.B, calls int) {
	if v, ok := m.perCall(b, calls); ok {
		b.ReportMetric(v, "cpu-µs/call")
	}
}

// perCall is the process's CPU time since start per call, in µs; false
// (logged) when it could not be read.
func (m cpuMeter) perCall(b *testing.B, calls int) (float64, bool) {
	if !m.ok || calls == 0 {
		return 0, false
	}
	t, err := processCPU(m.pid)
	if err != nil {
		b.Logf("cpu per call not measured: %v", err)
		return 0, false
	}
	return float64((t - m.start).Nanoseconds()) / 1e3 / float64(calls), true
}

// processCPU is the time the threads of pid have run, from each thread's
// schedstat (nanoseconds, where /proc/<pid>/stat counts 10 ms ticks).
// Threads that ended are missed; Go and Node keep theirs.
func processCPU(pid int) (time.Duration, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if err != nil {
			continue // the thread ended meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", dir, err)
		}
		sum += time.Duration(ns)
	}
	return sum, nil
}

// BenchmarkThroughput64 is 64 HTTP sessions calling at once.
func BenchmarkThroughput64(b *testing.B) { throughput(b, 64, "http", "http-modern") }

// rssKB is a process's resident set size in KiB.
func rssKB(b *testing.B, pid int) float64 {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb
		}
	}
	b.Fatalf("no VmRSS for process %d", pid)
	return 0
}

// BenchmarkMemoryIdleSessions is the relay's memory with 1,000 idle HTTP
// sessions open (each initialised, then quiet): rss-MB with all of them,
// KB/session over one session, and idle-growth-KB, what the RSS gained in
// PLANLOCK_BENCH_IDLE (default 10s) of nothing happening. Run it with
// -benchtime 1x: the figures do not depend on b.N.
func BenchmarkMemoryIdleSessions(b *testing.B) {
	const sessions = 1000
	idle := 10 * time.Second
	if d, err := time.ParseDuration(os.Getenv("PLANLOCK_BENCH_IDLE")); err == nil {
		idle = d
	}
	for _, kind := range []string{"passthrough", "planlock"} {
		b.Run("http/"+kind, func(b *testing.B) {
			for range b.N {
				url, pid := serveHTTPProc(b, kind)
				var cs []*client.Client
				open := func() {
					t, err := transport.NewStreamableHTTP(url)
					if err != nil {
						b.Fatal(err)
					}
					c := connect(b, t, false)
					echo(b, c)
					cs = append(cs, c)
				}
				open()
				one := rssKB(b, pid)
				for len(cs) < sessions {
					open()
				}
				all := rssKB(b, pid)
				time.Sleep(idle)
				after := rssKB(b, pid)
				b.ReportMetric(all/1024, "rss-MB")
				b.ReportMetric((all-one)/(sessions-1), "KB/session")
				b.ReportMetric(after-all, "idle-growth-KB")
				for _, c := range cs {
					c.Close()
				}
			}
		})
	}
}

// BenchmarkMemoryPlan10000Steps is the proxy's memory with a 10,000-step
// plan loaded, after initialize and one call (rss-MB). Run it with
// -benchtime 1x.
func BenchmarkMemoryPlan10000Steps(b *testing.B) {
	for range b.N {
		dir := b.TempDir()
		plan := filepath.Join(dir, "big.hcl")
		src := bigPlan(b, 10000)
		// The big plan's tools do not exist upstream; one step for echo.
		src = bytes.Replace(src, []byte("  step \"s0\" {"), []byte("  step \"echo\" {\n    tool      = \"echo\"\n    max_calls = 1000000\n    arg \"message\" { max_length = 100 }\n  }\n\n  step \"s0\" {"), 1)
		if err := os.WriteFile(plan, src, 0o644); err != nil {
			b.Fatal(err)
		}
		cmd := []string{bin(b, "planlock"), "proxy", "--plan", plan, "--insecure-skip-verify", "--state", filepath.Join(dir, "state"), "--", bin(b, "testupstream")}
		var started *exec.Cmd
		c := connect(b, transport.NewStdioWithOptions(cmd[0], nil, cmd[1:],
			transport.WithCommandFunc(func(ctx context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
				started = exec.CommandContext(ctx, command, args...)
				started.Env = append(os.Environ(), env...)
				return started, nil
			})), false)
		echo(b, c)
		b.ReportMetric(rssKB(b, started.Process.Pid)/1024, "rss-MB")
		c.Close()
	}
}
