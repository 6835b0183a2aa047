//go:build e2e

// The bare relay of bench/passthrough, built, between a client and the test
// upstream or a reference server: it must relay byte for byte (the floor
// the proxy's benchmarks compare against).

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/planlock/planlock/internal/testkit/peers"
)

// ptProtocolVersion is what the tests' client asks for, as the pass-through
// asks of its upstream.
const ptProtocolVersion = "2025-11-25"

// ptClient is an initialised MCP client whose requests return the result
// bytes exactly as received.
type ptClient struct {
	c   *client.Client
	ids atomic.Int64
}

func ptConnect(tb testing.TB, argv []string, url string) *ptClient {
	tb.Helper()
	ctx := context.Background()
	var c *client.Client
	var err error
	if url != "" {
		c, err = client.NewStreamableHttpClient(url)
		if err == nil {
			err = c.Start(ctx)
		}
	} else {
		c, err = client.NewStdioMCPClientWithOptions(argv[0], os.Environ(), argv[1:])
	}
	if err != nil {
		tb.Fatalf("start client: %v", err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = ptProtocolVersion
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		tb.Fatalf("initialize: %v", err)
	}
	return &ptClient{c: c}
}

func (r *ptClient) request(tb testing.TB, method string, params any) json.RawMessage {
	tb.Helper()
	id := mcp.NewRequestId("t-" + strconv.FormatInt(r.ids.Add(1), 10))
	resp, err := r.c.GetTransport().SendRequest(context.Background(), transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Method: method, Params: params})
	if err != nil {
		tb.Fatalf("%s: %v", method, err)
	}
	if resp.Error != nil {
		tb.Fatalf("%s: JSON-RPC error %d %s", method, resp.Error.Code, resp.Error.Message)
	}
	return resp.Result
}

func TestRelaysByteFaithfully(t *testing.T) {
	up, pt := testUpstreamBin, passthroughBin
	direct := ptConnect(t, []string{up}, "")
	setups := []struct {
		name    string
		connect func(t *testing.T) *ptClient
	}{
		{"stdio to stdio", func(t *testing.T) *ptClient { return ptConnect(t, []string{pt, "--", up}, "") }},
		{"http to stdio", func(t *testing.T) *ptClient { return ptConnect(t, nil, peers.StartHTTP(t, pt, "--", up)) }},
		{"stdio to http", func(t *testing.T) *ptClient {
			return ptConnect(t, []string{pt, "--upstream-url", peers.StartHTTP(t, up)}, "")
		}},
	}
	calls := []map[string]any{
		{"name": "echo", "arguments": map[string]any{"message": "hello"}},
		{"name": "echo", "arguments": json.RawMessage(`{"message":"unicode é ✓ \u0000 \"quoted\""}`)},
		{"name": "echo", "arguments": map[string]any{"message": strings.Repeat("long ", 2000)}},
		{"name": "big", "arguments": map[string]any{"bytes": 70000}},
	}
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			via := s.connect(t)
			if d, v := direct.request(t, "tools/list", map[string]any{}), via.request(t, "tools/list", map[string]any{}); !bytes.Equal(d, v) {
				t.Errorf("tools/list differs:\ndirect %s\nvia    %s", d, v)
			}
			for i, c := range calls {
				if d, v := direct.request(t, "tools/call", c), via.request(t, "tools/call", c); !bytes.Equal(d, v) {
					t.Errorf("call %d differs:\ndirect %.300s\nvia    %.300s", i, d, v)
				}
			}
		})
	}
}

// The benchmarks measure one tools/call echo round trip directly and through
// the pass-through, over stdio and HTTP: the floor for one extra hop. Besides
// ns/op (the mean) they report the median as p50-µs.
func BenchmarkEcho(b *testing.B) {
	up, pt := testUpstreamBin, passthroughBin
	setups := []struct {
		name    string
		connect func(b *testing.B) *ptClient
	}{
		{"direct/stdio", func(b *testing.B) *ptClient { return ptConnect(b, []string{up}, "") }},
		{"passthrough/stdio", func(b *testing.B) *ptClient { return ptConnect(b, []string{pt, "--", up}, "") }},
		{"direct/http", func(b *testing.B) *ptClient { return ptConnect(b, nil, peers.StartHTTP(b, up)) }},
		{"passthrough/http", func(b *testing.B) *ptClient { return ptConnect(b, nil, peers.StartHTTP(b, pt, "--", up)) }},
	}
	for _, s := range setups {
		b.Run(s.name, func(b *testing.B) {
			c := s.connect(b)
			c.request(b, "tools/call", echoCall)
			var lat []time.Duration
			for b.Loop() {
				start := time.Now()
				c.request(b, "tools/call", echoCall)
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		})
	}
}

var echoCall = map[string]any{"name": "echo", "arguments": map[string]any{"message": "hello"}}

// BenchmarkEchoConcurrentHTTP runs 16 clients, each with its own HTTP
// session, calling echo concurrently; it reports calls per second.
func BenchmarkEchoConcurrentHTTP(b *testing.B) {
	const clients = 16
	up, pt := testUpstreamBin, passthroughBin
	setups := []struct {
		name string
		url  func(b *testing.B) string
	}{
		{"direct", func(b *testing.B) string { return peers.StartHTTP(b, up) }},
		{"passthrough", func(b *testing.B) string { return peers.StartHTTP(b, pt, "--", up) }},
	}
	for _, s := range setups {
		b.Run(s.name, func(b *testing.B) {
			url := s.url(b)
			cs := make([]*ptClient, clients)
			for i := range cs {
				cs[i] = ptConnect(b, nil, url)
				cs[i].request(b, "tools/call", echoCall)
			}
			var next atomic.Int64
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for _, c := range cs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						c.requestErr("tools/call", echoCall)
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		})
	}
}

// requestErr is request for goroutines other than the benchmark's own, where
// Fatal must not be called; a failure panics the benchmark.
func (r *ptClient) requestErr(method string, params any) {
	id := mcp.NewRequestId("t-" + strconv.FormatInt(r.ids.Add(1), 10))
	resp, err := r.c.GetTransport().SendRequest(context.Background(), transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Method: method, Params: params})
	if err != nil {
		panic(fmt.Sprintf("%s: %v", method, err))
	}
	if resp.Error != nil {
		panic(fmt.Sprintf("%s: JSON-RPC error %d %s", method, resp.Error.Code, resp.Error.Message))
	}
}

// TestConformanceContentScenarios runs the conformance scenarios about tool
// listing and result content through the pass-through in front of the test
// upstream: one extra hop on mcp-go must not lose them. (The bare
// pass-through does not relay notifications or server-to-client requests, so
// the logging, progress, sampling and elicitation scenarios are out of its
// scope; planlock's proxy must pass every scenario of the baseline.)
func TestConformanceContentScenarios(t *testing.T) {
	upstream := peers.StartHTTP(t, testUpstreamBin, "--conformance")
	url := peers.StartHTTP(t, passthroughBin, "--upstream-url", upstream)
	scenarios := []string{
		"tools-list", "json-schema-2020-12", "tools-call-simple-text", "tools-call-image", "tools-call-audio",
		"tools-call-embedded-resource", "tools-call-mixed-content", "tools-call-error",
	}
	tools := peers.Baseline(t).TestUpstream.Tools
	res := peers.Conformance(t, url, scenarios...)
	for _, name := range scenarios {
		if !slices.Contains(tools, name) {
			t.Errorf("%s is not a baseline tool scenario of the test upstream", name)
		}
		if !res[name].OK() {
			t.Errorf("through the pass-through: %s", res[name])
		}
	}
}

// TestAgentThroughPassthrough drives server-everything over stdio through the
// pass-through with the official SDK client.
func TestAgentThroughPassthrough(t *testing.T) {
	argv := append([]string{passthroughBin, "--"}, peers.EverythingStdio(t)...)
	tr := peers.RunAgent(t, peers.Stdio(argv...), peers.Script{Steps: []peers.Step{
		peers.ListTools(),
		peers.CallTool("get-sum", map[string]any{"a": 20, "b": 22}),
	}})
	if !tr.Connect.OK {
		t.Fatalf("connect:\n%s", tr)
	}
	if tools := tr.Step(t, "0").Tools; !slices.Contains(tools, "echo") {
		t.Errorf("tools = %v", tools)
	}
	if r := tr.Step(t, "1"); r.Text != "The sum of 20 and 22 is 42." {
		t.Errorf("get-sum = %q", r.Text)
	}
}
