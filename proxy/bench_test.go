package proxy

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/proxy/ledger"
)

// BenchmarkProxyHTTP16 runs the proxy in process (for profiling: go test
// -cpuprofile) with 16 concurrent HTTP clients in front of the test upstream.
// bench/ compares it with a bare relay.
func BenchmarkProxyHTTP16(b *testing.B) {
	b.Run("ledger", func(b *testing.B) { benchHTTP16(b, nil, ledger.Options{}) })
	b.Run("ledger-sync-each-call", func(b *testing.B) { benchHTTP16(b, nil, ledger.Options{SyncEachCall: true}) })
	// Without durable state: the cost of the relay and the gate alone.
	b.Run("nostate", func(b *testing.B) { benchHTTP16(b, noState{}, ledger.Options{}) })
}

// noState counts nothing and writes nothing: only for measuring.
type noState struct{}

// localState: like the ledger, it never waits on the network, so the stdio
// fast lane takes calls over it and BenchmarkProxyStdio compares like with
// like (fastlane.go).
func (noState) localState() {}

func (noState) Progress(string) ledger.Progress { return ledger.Progress{} }
func (noState) Reserve(context.Context, ledger.Reservation) (ledger.Ticket, error) {
	return ledger.Ticket{}, nil
}
func (noState) Complete(context.Context, ledger.Ticket, ledger.Outcome) error { return nil }
func (noState) Block(context.Context, ledger.Call, string) error              { return nil }
func (noState) NewHold(context.Context, ledger.Call, ledger.HoldSpec) (ledger.Hold, error) {
	return ledger.Hold{}, nil
}
func (noState) FindHold(ledger.Call) (ledger.Hold, bool) { return ledger.Hold{}, false }
func (noState) ListHolds() []ledger.Hold                 { return nil }

// newInProcessProxy builds a proxy for planSrc in front of the test upstream,
// with state st (nil: a fresh ledger opened with o, closed when the test
// ends). It returns the proxy and the ledger.
func newInProcessProxy(t testing.TB, planSrc string, st State, o ledger.Options) (*Proxy, *ledger.Ledger) {
	t.Helper()
	plan, diags := hclplan.Parse("plan.hcl", []byte(planSrc))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	o.Dir = filepath.Join(t.TempDir(), "state")
	l, err := ledger.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if st == nil {
		st = l
	}
	env, _ := UpstreamEnv(nil, func(string) (string, bool) { return "", false })
	p, err := New(Config{Plan: plan, State: st, Upstream: UpstreamConfig{Command: []string{testUpstreamBin}, Env: env}})
	if err != nil {
		t.Fatal(err)
	}
	return p, l
}

// serveHTTPInProcess serves planSrc in process over streamable HTTP (see
// newInProcessProxy) until the test ends. It returns the URL and the ledger.
func serveHTTPInProcess(t testing.TB, planSrc string, st State, o ledger.Options) (string, *ledger.Ledger) {
	t.Helper()
	p, l := newInProcessProxy(t, planSrc, st, o)
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = p.ServeListener(ctx, ln, "") }()
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + ln.Addr().String() + "/mcp", l
}

// connectHTTP starts and initialises an mcp-go client of url; onNotify, if
// set, gets the notifications.
func connectHTTP(t testing.TB, ctx context.Context, url string, onNotify func(mcp.JSONRPCNotification)) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	if onNotify != nil {
		c.OnNotification(onNotify)
	}
	startClient(t, ctx, c)
	t.Cleanup(func() { c.Close() })
	return c
}

// startClient starts c and initialises its session.
func startClient(t testing.TB, ctx context.Context, c *client.Client) {
	t.Helper()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
}

// benchPlan allows the test upstream's echo as often as a benchmark wants.
const benchPlan = `
plan "bench" {
  goal  = "echo"
  order = "any"
  step "echo" {
    tool      = "echo"
    max_calls = 1000000000
    arg "message" { max_length = 100 }
  }
}`

func benchHTTP16(b *testing.B, st State, o ledger.Options) {
	ctx := context.Background()
	url, l := serveHTTPInProcess(b, benchPlan, st, o)
	const clients = 16
	cs := make([]*client.Client, clients)
	call := func(c *client.Client) {
		req := mcp.CallToolRequest{}
		req.Params.Name = "echo"
		req.Params.Arguments = map[string]any{"message": "hello"}
		res, err := c.CallTool(ctx, req)
		if err != nil || res.IsError {
			b.Errorf("echo: %v %+v", err, res)
		}
	}
	for i := range cs {
		c := connectHTTP(b, ctx, url, nil)
		cs[i] = c
		call(c)
	}
	before := l.Stats()
	b.ResetTimer()
	var wg sync.WaitGroup
	per := (b.N + clients - 1) / clients
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				call(c)
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if st == nil {
		// How well group commit shares the fdatasyncs among the clients.
		after := l.Stats()
		b.ReportMetric(float64(after.Syncs-before.Syncs)/float64(per*clients), "syncs/call")
		b.ReportMetric(float64(after.Records-before.Records)/float64(after.Batches-before.Batches), "records/write")
		b.ReportMetric(float64((after.SyncTime-before.SyncTime).Microseconds())/float64(after.Syncs-before.Syncs), "µs/sync")
	}
}

// BenchmarkProxyStdio is one client's sequential calls over stdio pipes, in
// process, with the ledger and without state: the difference is the cost of
// the durable count and the audit records on the call path.
func BenchmarkProxyStdio(b *testing.B) {
	b.Run("ledger", func(b *testing.B) { benchStdio(b, nil) })
	b.Run("nostate", func(b *testing.B) { benchStdio(b, noState{}) })
}

func benchStdio(b *testing.B, st State) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, _ := newInProcessProxy(b, benchPlan, st, ledger.Options{})
	cr, pw := io.Pipe()
	pr, cw := io.Pipe()
	go func() { _ = p.ServeStdio(ctx, cr, cw) }()
	c := client.NewClient(transport.NewIO(pr, pw, io.NopCloser(strings.NewReader(""))))
	startClient(b, ctx, c)
	req := mcp.CallToolRequest{}
	req.Params.Name = "echo"
	req.Params.Arguments = map[string]any{"message": "hello"}
	for range 20 {
		if _, err := c.CallTool(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		res, err := c.CallTool(ctx, req)
		if err != nil || res.IsError {
			b.Fatalf("echo: %v %+v", err, res)
		}
	}
	b.StopTimer()
	c.Close()
	pw.Close()
}
