//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/planlock/planlock/internal/testkit/peers"
)

// TestSoak runs one planlock proxy --listen (stdio test upstream, file
// state) for PLANLOCK_SOAK (a duration; scripts/soak sets it) with many
// idle HTTP sessions and a steady call rate, all on loopback, and reports
// at its start and end: RSS, open fds, goroutines, call latency p50/p99
// and journal bytes per call. It stops by itself; skipped without
// PLANLOCK_SOAK. It fails if a call fails or nothing is counted.
func TestSoak(t *testing.T) {
	total, err := time.ParseDuration(os.Getenv("PLANLOCK_SOAK"))
	if err != nil || total <= 0 {
		t.Skip("PLANLOCK_SOAK=DURATION (scripts/soak) runs the soak")
	}
	idle := envInt(t, "PLANLOCK_SOAK_IDLE", 1000)
	rate := envInt(t, "PLANLOCK_SOAK_RATE", 50) // calls per second
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	cmd := exec.Command(planlockBin, "proxy", "--plan", writePlan(t, soakPlan), "--insecure-skip-verify", "--state", state,
		"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--reload-interval", "0", "--no-hold-prs", "--", testUpstreamBin)
	cmd.Env = os.Environ()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	log := &peers.SyncBuffer{}
	mcpURL, metricsURL := make(chan string, 1), make(chan string, 1)
	go func() {
		serving := regexp.MustCompile(`serving plan "\S+" on (http://\S+/mcp)`)
		metrics := regexp.MustCompile(`metrics on (http://\S+/metrics)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.Write([]byte(sc.Text() + "\n"))
			if m := serving.FindStringSubmatch(sc.Text()); m != nil {
				mcpURL <- m[1]
			}
			if m := metrics.FindStringSubmatch(sc.Text()); m != nil {
				metricsURL <- m[1]
			}
		}
	}()
	var mu, murl string
	for mu == "" || murl == "" {
		select {
		case mu = <-mcpURL:
		case murl = <-metricsURL:
		case <-time.After(60 * time.Second):
			t.Fatalf("the proxy did not start:\n%s", log.String())
		}
	}
	pid := cmd.Process.Pid
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	ctx := context.Background()

	// Idle sessions: initialized, then never used again, each on its own
	// connection, left open (keep-alive) for the server to keep or close.
	for i := range idle {
		own := &http.Client{Transport: &http.Transport{}}
		defer own.CloseIdleConnections()
		if _, err := soakInit(ctx, own, mu, fmt.Sprintf("idle-%d", i)); err != nil {
			t.Fatalf("idle session %d: %v", i, err)
		}
	}
	// The steady rate: four sessions take turns.
	var callers []string
	for i := range 4 {
		sid, err := soakInit(ctx, hc, mu, fmt.Sprintf("caller-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		callers = append(callers, sid)
	}
	var calls atomic.Int64
	var lmu sync.Mutex
	var lats []time.Duration
	window := func() []time.Duration {
		lmu.Lock()
		defer lmu.Unlock()
		w := lats
		lats = nil
		return w
	}
	errs := make(chan error, 1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			start := time.Now()
			if err := soakCall(ctx, hc, mu, callers[n%len(callers)], n); err != nil {
				select {
				case errs <- err:
				default:
				}
				return
			}
			lmu.Lock()
			lats = append(lats, time.Since(start))
			lmu.Unlock()
			calls.Add(1)
		}
	}()
	sample := func(name string) soakSample {
		s := soakSample{name: name, rss: vmRSS(t, pid), fds: countFDs(t, pid), goroutines: goroutines(t, hc, murl),
			calls: calls.Load(), journal: dirBytes(t, state)}
		return s
	}
	measure := min(total/5, time.Minute) // each window
	time.Sleep(measure)
	window()
	time.Sleep(measure)
	first := sample("start")
	first.p50, first.p99 = percentiles(window())
	time.Sleep(total - 3*measure)
	window()
	mid := sample("")
	time.Sleep(measure)
	last := sample("end")
	last.p50, last.p99 = percentiles(window())
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("a call failed: %v\n%s", err, log.String())
	default:
	}
	if last.calls == 0 {
		t.Fatal("no call was made")
	}
	startBPC := float64(first.journal) / float64(max(first.calls, 1))
	endBPC := float64(last.journal-mid.journal) / float64(max(last.calls-mid.calls, 1))
	fmt.Printf("SOAK %s, %d idle HTTP sessions, %d calls/s (%d calls), %s cores\n", total, idle, rate, last.calls, strconv.Itoa(runtime.NumCPU()))
	fmt.Printf("SOAK | | RSS MiB | fds | goroutines | p50 ms | p99 ms | journal bytes/call |\n")
	fmt.Printf("SOAK |---|---|---|---|---|---|---|\n")
	for _, s := range []struct {
		x   soakSample
		bpc float64
	}{{first, startBPC}, {last, endBPC}} {
		fmt.Printf("SOAK | %s | %.1f | %d | %d | %.2f | %.2f | %.0f |\n", s.x.name, float64(s.x.rss)/(1<<20), s.x.fds, s.x.goroutines,
			float64(s.x.p50.Microseconds())/1000, float64(s.x.p99.Microseconds())/1000, s.bpc)
	}
}

const soakPlan = `
plan "soak" {
  goal  = "a long steady run"
  order = "any"
  step "echo" {
    tool      = "echo"
    max_calls = 100000000
    arg "message" { any = true }
  }
}
`

type soakSample struct {
	name       string
	rss        int64
	fds        int
	goroutines int
	calls      int64
	journal    int64
	p50, p99   time.Duration
}

func envInt(t *testing.T, name string, def int) int {
	if s := os.Getenv(name); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q", name, s)
		}
		return n
	}
	return def
}

// soakPost posts one JSON-RPC message and reads the whole answer.
func soakPost(ctx context.Context, hc *http.Client, u, sid, body string) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode/100 != 2 {
		err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	return resp, b, err
}

func soakInit(ctx context.Context, hc *http.Client, u, name string) (string, error) {
	resp, _, err := soakPost(ctx, hc, u, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"`+name+`","version":"1"}}}`)
	if err != nil {
		return "", err
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		return "", fmt.Errorf("no session id")
	}
	if _, _, err := soakPost(ctx, hc, u, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		return "", err
	}
	return sid, nil
}

func soakCall(ctx context.Context, hc *http.Client, u, sid string, n int) error {
	_, b, err := soakPost(ctx, hc, u, sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"message":"soak %d"}}}`, n+2, n))
	if err != nil {
		return err
	}
	if !bytes.Contains(b, []byte(fmt.Sprintf("soak %d", n))) || bytes.Contains(b, []byte(`"isError":true`)) {
		return fmt.Errorf("call %d: %s", n, b)
	}
	return nil
}

func vmRSS(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func countFDs(t *testing.T, pid int) int {
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

func goroutines(t *testing.T, hc *http.Client, u string) int {
	resp, err := hc.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int(n)
		}
	}
	t.Fatal("no go_goroutines in the metrics")
	return 0
}

func dirBytes(t *testing.T, dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	slices.Sort(d)
	return d[len(d)/2], d[min(len(d)-1, len(d)*99/100)]
}
