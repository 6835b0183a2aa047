package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/testkit/peers"
	"github.com/planlock/planlock/proxy/ledger"
)

// eraPlan allows echo twice, with a message of at most 10 characters.
const eraPlan = `
plan "eras" {
  goal  = "echo through upstreams of either protocol era"
  order = "any"
  step "echo" {
    tool      = "echo"
    max_calls = 2
    arg "message" { max_length = 10 }
  }
}`

// eraProxy is a proxy of planText in front of the upstream up, with a
// ledger of its own.
func eraProxy(t *testing.T, planText string, up UpstreamConfig) *Proxy {
	t.Helper()
	p, _ := eraProxyState(t, planText, up)
	return p
}

// eraProxyState is eraProxy, also returning its state directory.
func eraProxyState(t *testing.T, planText string, up UpstreamConfig) (*Proxy, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	plan, diags := hclplan.Parse("plan.hcl", []byte(planText))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	l, err := ledger.Open(context.Background(), ledger.Options{Dir: dir, Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if up.URL == "" {
		up.Env, _ = UpstreamEnv(nil, os.LookupEnv)
	}
	up.Stderr = testWriter{t}
	up.ClientName, up.ClientVersion = "planlock", "test"
	p, err := New(Config{Plan: plan, State: l, Now: fixedNow, CallTimeout: 30 * time.Second, Upstream: up, Log: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	return p, dir
}

// eraClient connects mcp-go v1.2.1's client (protocol version pinned, or
// "" for its default, 2026-07-28), which declares elicitation and
// sampling, to p over stdio.
func eraClient(t *testing.T, p *Proxy, version string) *client.Client {
	t.Helper()
	return eraClientOn(t, p, "stdio", version)
}

// eraClientOn is eraClient over front: "stdio", or "http" (p served on a
// listener of its own, the client over streamable HTTP).
func eraClientOn(t *testing.T, p *Proxy, front, version string) *client.Client {
	t.Helper()
	return eraClientWith(t, p, front, version, &askedHandlers{})
}

// eraClientWith is eraClientOn with h answering the client's input
// requests.
func eraClientWith(t *testing.T, p *Proxy, front, version string, h clientHandlers) *client.Client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	var tr transport.Interface
	closeTr := func() {}
	if front == "stdio" {
		cr, pw := io.Pipe()
		pr, cw := io.Pipe()
		go func() {
			defer close(served)
			if err := p.ServeStdio(ctx, cr, cw); err != nil {
				t.Logf("serve: %v", err)
			}
		}()
		tr = transport.NewIO(pr, pw, io.NopCloser(strings.NewReader("")))
		closeTr = func() { pr.Close(); pw.Close() }
	} else {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer close(served)
			_ = p.ServeListenerWith(ctx, ln, HTTPOptions{})
		}()
		// A legacy client keeps the session's GET stream open, where
		// mcp-go's server sends it a sampling or roots request.
		var opts []transport.StreamableHTTPCOption
		if version != "" {
			//lint:ignore SA1019 a legacy client's GET stream is what is wanted
			opts = append(opts, transport.WithContinuousListening())
		}
		h, err := transport.NewStreamableHTTP("http://"+ln.Addr().String()+"/mcp", opts...)
		if err != nil {
			t.Fatal(err)
		}
		tr = h
	}
	c := client.NewClient(tr, client.WithElicitationHandler(h), client.WithSamplingHandler(h))
	t.Cleanup(func() {
		c.Close()
		closeTr()
		cancel()
		<-served
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	defer wcancel()
	if err := p.WaitUpstream(wctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = version
	init.Params.ClientInfo = mcp.Implementation{Name: "agent", Version: "1"}
	if _, err := c.Initialize(wctx, init); err != nil {
		t.Fatal(err)
	}
	return c
}

// seenRequest is what an in-process upstream saw of one POST.
type seenRequest struct {
	body                           string // the body's method
	method, name, session, version string // headers
	meta                           map[string]json.RawMessage
}

// upRecorder wraps an upstream handler and keeps every POST's standard
// headers and _meta.
type upRecorder struct {
	mu   sync.Mutex
	seen []seenRequest
	next http.Handler
}

func (r *upRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method == http.MethodPost {
		b, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(b))
		var m struct {
			Method string `json:"method"`
			Params struct {
				Meta map[string]json.RawMessage `json:"_meta"`
			} `json:"params"`
		}
		_ = json.Unmarshal(b, &m)
		r.mu.Lock()
		r.seen = append(r.seen, seenRequest{body: m.Method, method: req.Header.Get(mcp.HeaderMethod), name: req.Header.Get(mcp.HeaderName),
			session: req.Header.Get(server.HeaderKeySessionID), version: req.Header.Get(mcp.HeaderProtocolVersion), meta: m.Params.Meta})
		r.mu.Unlock()
	}
	r.next.ServeHTTP(w, req)
}

func (r *upRecorder) calls() []seenRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []seenRequest
	for _, s := range r.seen {
		if s.body == "tools/call" {
			out = append(out, s)
		}
	}
	return out
}

// mcpgoUpstream serves an mcp-go v1.2.1 server with echo over streamable
// HTTP in process, stateless, offering only versions (all it implements
// when none).
func mcpgoUpstream(t *testing.T, versions ...string) (string, *upRecorder) {
	t.Helper()
	s := server.NewMCPServer("mcpgo", "1.2.1", server.WithToolCapabilities(true))
	s.AddTool(mcp.NewTool("echo", mcp.WithString("message", mcp.Required())),
		func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(r.GetString("message", "")), nil
		})
	opts := []server.StreamableHTTPOption{server.WithStateLess(true)}
	if len(versions) > 0 {
		opts = append(opts, server.WithStreamableHTTPProtocolVersions(versions...))
	}
	rec := &upRecorder{next: server.NewStreamableHTTPServer(s, opts...)}
	ts := httptest.NewServer(rec)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp", rec
}

// refused reports whether a call was refused (by the gate or anyone).
func refused(res *mcp.CallToolResult, err error) bool { return err != nil || res.IsError }

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestUpstreamOfEitherEra: an upstream that speaks only protocol
// 2026-07-28 (the TypeScript SDK v2 server with legacy rejected, over
// stdio and HTTP; mcp-go v1.2.1's stateless server restricted to it), a
// dual-era one (mcp-go v1.2.1 stateless, spoken to in its legacy era) and
// a legacy one (server-everything, over stdio and HTTP) are all proxied, to a modern
// and a legacy client, with the plan enforced: echo within its bounds
// reaches the upstream, a too-long message and a third call do not. A
// modern upstream gets per-request _meta with planlock's own (empty)
// client capabilities, never the agent's, and over HTTP the Mcp-Method and
// Mcp-Name headers and no session id.
func TestUpstreamOfEitherEra(t *testing.T) {
	type upstream struct {
		name   string
		start  func(t *testing.T) (UpstreamConfig, func() int, *upRecorder)
		modern bool
	}
	callsLog := func(t *testing.T) (string, func() int) {
		f := filepath.Join(t.TempDir(), "calls.jsonl")
		return f, func() int { return len(peers.ReadCalls(t, f)) }
	}
	ups := []upstream{
		{"ts-v2-modern-only-stdio", func(t *testing.T) (UpstreamConfig, func() int, *upRecorder) {
			f, n := callsLog(t)
			return UpstreamConfig{Command: peers.ModernStdio(t, "--calls-log", f)}, n, nil
		}, true},
		{"ts-v2-modern-only-http", func(t *testing.T) (UpstreamConfig, func() int, *upRecorder) {
			f, n := callsLog(t)
			return UpstreamConfig{URL: peers.StartModernHTTP(t, "--calls-log", f)}, n, nil
		}, true},
		{"mcpgo-modern-only-http", func(t *testing.T) (UpstreamConfig, func() int, *upRecorder) {
			url, rec := mcpgoUpstream(t, mcp.ProtocolVersion20260728)
			return UpstreamConfig{URL: url}, func() int { return len(rec.calls()) }, rec
		}, true},
		{"mcpgo-dual-era-http", func(t *testing.T) (UpstreamConfig, func() int, *upRecorder) {
			url, rec := mcpgoUpstream(t)
			return UpstreamConfig{URL: url}, func() int { return len(rec.calls()) }, rec
		}, false},
		{"everything-legacy-stdio", func(t *testing.T) (UpstreamConfig, func() int, *upRecorder) {
			return UpstreamConfig{Command: peers.EverythingStdio(t)}, nil, nil
		}, false},
		{"everything-legacy-http", func(t *testing.T) (UpstreamConfig, func() int, *upRecorder) {
			return UpstreamConfig{URL: peers.StartEverythingHTTP(t)}, nil, nil
		}, false},
	}
	for _, u := range ups {
		for _, version := range []string{"", mcp.LATEST_LEGACY_PROTOCOL_VERSION} {
			clientEra := "modern-client"
			if version != "" {
				clientEra = "legacy-client"
			}
			t.Run(u.name+"/"+clientEra, func(t *testing.T) {
				cfg, upstreamCalls, rec := u.start(t)
				p := eraProxy(t, eraPlan, cfg)
				c := eraClient(t, p, version)
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, tool := range tools.Tools {
					names = append(names, tool.Name)
				}
				if !strings.Contains(" "+strings.Join(names, " ")+" ", " echo ") {
					t.Fatalf("tools/list = %v, want echo among them", names)
				}
				call := func(msg string) (*mcp.CallToolResult, error) {
					return callTool(ctx, c, "echo", map[string]any{"message": msg})
				}
				res, err := call("hi")
				if refused(res, err) {
					t.Fatalf("echo hi: %v %+v", err, res)
				}
				if !strings.Contains(resultText(res), "hi") {
					t.Fatalf("echo hi answered %q", resultText(res))
				}
				if res, err := call("far longer than ten"); !refused(res, err) {
					t.Fatalf("a message over max_length was relayed: %+v", res)
				}
				if res, err := call("again"); refused(res, err) {
					t.Fatalf("second echo: %v %+v", err, res)
				}
				if res, err := call("third"); !refused(res, err) {
					t.Fatalf("a call past max_calls = 2 was relayed: %+v", res)
				}
				if upstreamCalls != nil {
					if n := upstreamCalls(); n != 2 {
						t.Fatalf("the upstream got %d tools/call, want 2", n)
					}
				}
				if rec != nil {
					for _, s := range rec.calls() {
						if !u.modern {
							if s.method != "" || s.version != mcp.LATEST_LEGACY_PROTOCOL_VERSION || s.meta[mcp.MetaKeyProtocolVersion] != nil {
								t.Errorf("a dual-era upstream is spoken to in its legacy era: Mcp-Method %q, MCP-Protocol-Version %q, _meta %v", s.method, s.version, s.meta)
							}
							continue
						}
						if s.method != "tools/call" || s.name != "echo" || s.session != "" || s.version != mcp.ProtocolVersion20260728 {
							t.Errorf("tools/call headers: Mcp-Method %q, Mcp-Name %q, Mcp-Session-Id %q, MCP-Protocol-Version %q", s.method, s.name, s.session, s.version)
						}
						if string(s.meta[mcp.MetaKeyProtocolVersion]) != `"2026-07-28"` || string(s.meta[mcp.MetaKeyClientCapabilities]) != `{}` {
							t.Errorf("tools/call _meta = %s", fmt.Sprint(s.meta))
						}
					}
				}
			})
		}
	}
}

// refusingStdio is a stdio upstream (node) that answers every request with
// -32022 naming only supported.
func refusingStdio(t *testing.T, supported string) []string {
	t.Helper()
	script := `const rl = require("readline").createInterface({input: process.stdin});
rl.on("line", (l) => { let m; try { m = JSON.parse(l); } catch { return; }
  if (m.id === undefined) return;
  process.stdout.write(JSON.stringify({jsonrpc: "2.0", id: m.id, error: {code: -32022, message: "Unsupported protocol version",
    data: {supported: [` + supported + `], requested: "x"}}}) + "\n"); });`
	return []string{peers.Node(t), "-e", script}
}

// TestUpstreamWithNoVersionInCommon: an upstream that speaks no protocol
// version planlock speaks (-32022 naming only 2099-01-01, over stdio and
// HTTP) is a definite refusal: the supervisor stops instead of retrying,
// the proxy does not start, and the reason is one line naming the upstream
// and the versions on both sides.
func TestUpstreamWithNoVersionInCommon(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&m)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2099-01-01"]}}}`, m.ID)
	}))
	defer ts.Close()
	for _, tc := range []struct {
		name string
		up   UpstreamConfig
		want string
	}{
		{"stdio", UpstreamConfig{Command: refusingStdio(t, `"2099-01-01"`)}, "node -e"},
		{"http", UpstreamConfig{URL: ts.URL}, ts.URL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := eraProxy(t, eraPlan, tc.up)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			ran := make(chan struct{})
			go func() { defer close(ran); p.Run(ctx) }()
			select {
			case <-ran:
			case <-ctx.Done():
				t.Fatal("the upstream is retried after a definite refusal")
			}
			err := p.WaitUpstream(ctx)
			if !errors.Is(err, ErrStartRefused) {
				t.Fatalf("WaitUpstream = %v, want ErrStartRefused", err)
			}
			msg := err.Error()
			for _, want := range []string{tc.want, "2099-01-01", "planlock speaks 2026-07-28, 2025-11-25"} {
				if !strings.Contains(msg, want) {
					t.Errorf("reason %q does not name %q", msg, want)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("reason spans lines: %q", msg)
			}
			serr := p.ServeStdio(ctx, strings.NewReader(""), io.Discard)
			if !errors.Is(serr, ErrStartRefused) {
				t.Fatalf("ServeStdio = %v, want the refusal", serr)
			}
		})
	}
}

// TestModernUpstreamGetsParamHeaders: a tool of a modern HTTP upstream
// (mcp-go v1.2.1, 2026-07-28 only) whose input schema mirrors an argument
// in a header (x-mcp-header) is callable through planlock: the call carries
// Mcp-Param-Region with the value of the body planlock sends, which mcp-go's
// server checks against that body.
func TestModernUpstreamGetsParamHeaders(t *testing.T) {
	s := server.NewMCPServer("mcpgo", "1.2.1", server.WithToolCapabilities(true))
	s.AddTool(mcp.NewToolWithRawSchema("route", "route by region",
		json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}},"required":["region"]}`)),
		func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("routed to " + r.GetString("region", "")), nil
		})
	var mu sync.Mutex
	var regions []string
	rec := &upRecorder{next: server.NewStreamableHTTPServer(s, server.WithStateLess(true),
		server.WithStreamableHTTPProtocolVersions(mcp.ProtocolVersion20260728))}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(mcp.HeaderMethod) == "tools/call" {
			mu.Lock()
			regions = append(regions, r.Header.Get("Mcp-Param-Region"))
			mu.Unlock()
		}
		rec.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close) // after the proxy's cleanup: its listen stream holds a connection open
	p := eraProxy(t, `
plan "route" {
  goal  = "route"
  order = "any"
  step "route" {
    tool      = "route"
    max_calls = 1
    arg "region" { max_length = 20 }
  }
}`, UpstreamConfig{URL: ts.URL + "/mcp"})
	c := eraClient(t, p, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := callTool(ctx, c, "route", map[string]any{"region": "eu-west"})
	if refused(res, err) || resultText(res) != "routed to eu-west" {
		t.Fatalf("route: %v %+v", err, res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(regions) != 1 || regions[0] != "eu-west" {
		t.Fatalf("Mcp-Param-Region of the calls = %q, want [eu-west]", regions)
	}
}

// BenchmarkUpstreamRequestByEra: one tools/call through Upstream.Request to
// mcp-go v1.2.1's stateless HTTP server in process, spoken to in its legacy
// era (dual-era server) and in 2026-07-28 (modern-only server): what the
// per-request _meta and headers cost.
func BenchmarkUpstreamRequestByEra(b *testing.B) {
	for _, era := range []struct {
		name     string
		versions []string
	}{{"legacy", nil}, {"modern", []string{mcp.ProtocolVersion20260728}}} {
		b.Run(era.name, func(b *testing.B) {
			s := server.NewMCPServer("mcpgo", "1.2.1", server.WithToolCapabilities(true))
			s.AddTool(mcp.NewTool("echo", mcp.WithString("message")), func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(r.GetString("message", "")), nil
			})
			opts := []server.StreamableHTTPOption{server.WithStateLess(true)}
			if era.versions != nil {
				opts = append(opts, server.WithStreamableHTTPProtocolVersions(era.versions...))
			}
			ts := httptest.NewServer(server.NewStreamableHTTPServer(s, opts...))
			defer ts.Close()
			u := newUpstream(UpstreamConfig{URL: ts.URL + "/mcp", ClientName: "planlock", ClientVersion: "bench"}, nil, nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go u.Run(ctx)
			if err := u.WaitReady(ctx); err != nil {
				b.Fatal(err)
			}
			params := json.RawMessage(`{"name":"echo","arguments":{"message":"hi"},"_meta":{"progressToken":1}}`)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := u.Request(ctx, "tools/call", params); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkModernParams: planlock's own share of a modern request, the
// _meta merged into a call's params.
func BenchmarkModernParams(b *testing.B) {
	u := newUpstream(UpstreamConfig{ClientName: "planlock", ClientVersion: "bench"}, nil, nil)
	for _, tc := range []struct{ name, params string }{
		{"no client meta", `{"name":"echo","arguments":{"message":"hi"}}`},
		{"client meta", `{"name":"echo","arguments":{"message":"hi"},"_meta":{"progressToken":1}}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := u.modernParams(json.RawMessage(tc.params), mcp.ProtocolVersion20260728, nil, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestModernParams: planlock's _meta replaces the client's protocol keys
// and log level and keeps the rest, on both of modernParams' paths (with
// and without a _meta of the client's); what is not an object is refused.
func TestModernParams(t *testing.T) {
	u := newUpstream(UpstreamConfig{ClientName: "planlock", ClientVersion: "1"}, nil, nil)
	const ours = `"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"planlock","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"`
	const lvl = `"io.modelcontextprotocol/logLevel":`
	for _, tt := range []struct {
		in    string
		level mcp.LoggingLevel
		want  string
	}{
		// The level is the one the client asked for (requestedLogLevel),
		// never what its _meta carried, on either road.
		{`{"name":"echo"}`, "info", `{"_meta":{` + ours + `,` + lvl + `"info"},"name":"echo"}`},
		{``, "warning", `{"_meta":{` + ours + `,` + lvl + `"warning"}}`},
		{`{"name":"echo","_meta":{"io.modelcontextprotocol/logLevel":"debug"}}`, "", `{"_meta":{` + ours + `},"name":"echo"}`},
		{`{"name":"echo","_meta":{"io.modelcontextprotocol/logLevel":"debug","progressToken":1}}`, "error", `{"_meta":{` + ours + `,` + lvl + `"error","progressToken":1},"name":"echo"}`},
		{``, "", `{"_meta":{` + ours + `}}`},
		{`null`, "", `{"_meta":{` + ours + `}}`},
		{` { } `, "", `{"_meta":{` + ours + `}}`},
		{`{"name":"echo","arguments":{"message":"hi"}}`, "", `{"_meta":{` + ours + `},"arguments":{"message":"hi"},"name":"echo"}`},
		{`{"name":"echo","_meta":{"progressToken":7,"io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/logLevel":"debug"}}`,
			"", `{"_meta":{` + ours + `,"progressToken":7},"name":"echo"}`},
		{`{"name":"\u005fmeta"}`, "", `{"_meta":{` + ours + `},"name":"_meta"}`},
		{`{"\u005fmeta":{"io.modelcontextprotocol/clientCapabilities":{"roots":{}}}}`, "", `{"_meta":{` + ours + `}}`},
	} {
		got, err := u.modernParams(json.RawMessage(tt.in), mcp.ProtocolVersion20260728, nil, tt.level)
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		var a, b any
		if json.Unmarshal(got, &a) != nil || json.Unmarshal([]byte(tt.want), &b) != nil || fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("%s: got %s, want %s", tt.in, got, tt.want)
		}
	}
	for _, in := range []string{`[1]`, `"x"`, `{"_meta":[1]}`} {
		if got, err := u.modernParams(json.RawMessage(in), mcp.ProtocolVersion20260728, nil, "info"); err == nil {
			t.Errorf("%s: got %s, want an error", in, got)
		}
	}
}

// eraScripted is a stdio upstream (node) that answers server/discover
// with discover (a JSON-RPC error or result member, raw), initialize of
// version 2025-06-18 with its result and any other initialize with -32022
// naming only 2025-06-18, and tools/list with one tool; it logs each
// method it receives, with the version it declares, to log.
func eraScripted(t *testing.T, discover, log string) []string {
	t.Helper()
	script := `const fs = require("fs"); const rl = require("readline").createInterface({input: process.stdin});
const say = (m) => process.stdout.write(JSON.stringify(Object.assign({jsonrpc: "2.0"}, m)) + "\n");
rl.on("line", (l) => { let m; try { m = JSON.parse(l); } catch { return; }
  const p = m.params || {};
  fs.appendFileSync(process.env.LOG, m.method + " " + (p.protocolVersion || (p._meta || {})["io.modelcontextprotocol/protocolVersion"] || "") + "\n");
  if (m.id === undefined) return;
  if (m.method === "server/discover") return say(Object.assign({id: m.id}, ` + discover + `));
  if (m.method === "initialize") {
    if (p.protocolVersion !== "2025-06-18") return say({id: m.id, error: {code: -32022, message: "Unsupported protocol version", data: {supported: ["2025-06-18"]}}});
    return say({id: m.id, result: {protocolVersion: "2025-06-18", capabilities: {tools: {}}, serverInfo: {name: "s", version: "1"}}});
  }
  if (m.method === "tools/list") return say({id: m.id, result: {tools: [{name: "echo", inputSchema: {type: "object"}}]}});
  say({id: m.id, error: {code: -32601, message: "no"}}); });`
	return []string{peers.Node(t), "-e", script}
}

// TestUpstreamVersionNegotiation: how the probe's answer and initialize's
// -32022 choose the version, read from what the upstream received.
func TestUpstreamVersionNegotiation(t *testing.T) {
	for _, tt := range []struct {
		name, discover string
		want           string // methods received, with versions
		refused        string // the refusal's text, when it is one
		preferModern   bool   // the plan has input rules
	}{
		{"method not found: legacy, then the version initialize names",
			`{error: {code: -32601, message: "Method not found"}}`,
			"server/discover 2026-07-28\ninitialize 2025-11-25\ninitialize 2025-06-18\nnotifications/initialized \ntools/list \n", "", false},
		{"-32022 naming a legacy version: initialize in it",
			`{error: {code: -32022, message: "Unsupported", data: {supported: ["2025-06-18"]}}}`,
			"server/discover 2026-07-28\ninitialize 2025-06-18\nnotifications/initialized \ntools/list \n", "", false},
		{"discover naming legacy versions (dual-era): initialize in the newest both speak",
			`{result: {supportedVersions: ["2026-07-28", "2025-06-18"], capabilities: {}}}`,
			"server/discover 2026-07-28\ninitialize 2025-06-18\nnotifications/initialized \ntools/list \n", "", false},
		{"dual-era, the plan having input rules: modern, no initialize",
			`{result: {supportedVersions: ["2026-07-28", "2025-06-18"], capabilities: {}}}`,
			"server/discover 2026-07-28\ntools/list 2026-07-28\n", "", true},
		{"-32022 naming a legacy version, the plan having input rules: initialize in it",
			`{error: {code: -32022, message: "Unsupported", data: {supported: ["2025-06-18"]}}}`,
			"server/discover 2026-07-28\ninitialize 2025-06-18\nnotifications/initialized \ntools/list \n", "", true},
		{"discover naming only 2026-07-28: modern, no initialize",
			`{result: {supportedVersions: ["2026-07-28"], capabilities: {tools: {}}}}`,
			"server/discover 2026-07-28\ntools/list 2026-07-28\n", "", false},
		{"discover naming nothing in common: refused",
			`{result: {supportedVersions: ["2099-01-01"], capabilities: {}}}`,
			"server/discover 2026-07-28\n", "server/discover names protocol versions 2099-01-01; planlock speaks 2026-07-28", false},
		{"-32022 naming nothing in common: refused",
			`{error: {code: -32022, message: "Unsupported", data: {supported: ["2099-01-01"]}}}`,
			"server/discover 2026-07-28\n", "it refused protocol version 2026-07-28 and supports 2099-01-01", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "log")
			env, _ := UpstreamEnv(nil, os.LookupEnv)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			tools, err := FetchTools(ctx, UpstreamConfig{Command: eraScripted(t, tt.discover, log), Env: append(env, "LOG="+log), Stderr: testWriter{t},
				PreferModern: func() bool { return tt.preferModern }})
			if tt.refused != "" {
				if !errors.Is(err, ErrStartRefused) || !strings.Contains(err.Error(), tt.refused) {
					t.Fatalf("FetchTools = %v, want the refusal %q", err, tt.refused)
				}
			} else if err != nil || len(tools) != 1 {
				t.Fatalf("FetchTools = %d tools, %v", len(tools), err)
			}
			got := ""
			if eventually(func() bool { got = readString(log); return got == tt.want }) {
				return
			}
			t.Fatalf("the upstream received\n%s\nwant\n%s", got, tt.want)
		})
	}
}

// eventually polls cond for up to a minute: what a process appends to a
// file after answering may land a little later.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}

// TestUpstreamRejectingItsOwnVersionOnce: an upstream whose first answer is
// -32022 naming the very version planlock asked for (what the conformance
// scenario request-metadata does: a client must retry with a supported
// version) is asked once more in that version, and then proxied in its
// era; a second such refusal would be definite.
func TestUpstreamRejectingItsOwnVersionOnce(t *testing.T) {
	u, rec := mcpgoUpstream(t, mcp.LATEST_PROTOCOL_VERSION)
	target, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	var rejected atomic.Bool
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && rejected.CompareAndSwap(false, true) {
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.NewDecoder(r.Body).Decode(&m)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":[%q],"requested":%q}}}`,
				m.ID, mcp.LATEST_PROTOCOL_VERSION, r.Header.Get(mcp.HeaderProtocolVersion))
			return
		}
		rec.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close) // after the proxy's cleanup: its listen stream holds a connection open
	p := eraProxy(t, eraPlan, UpstreamConfig{URL: ts.URL + target.Path})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := eraClient(t, p, "")
	req := mcp.CallToolRequest{}
	req.Params.Name = "echo"
	req.Params.Arguments = map[string]any{"message": "hi"}
	res, err := c.CallTool(ctx, req)
	if refused(res, err) || resultText(res) != "hi" {
		t.Fatalf("call through the upstream: %v %+v", err, res)
	}
	calls := rec.calls()
	if len(calls) != 1 || calls[0].version != mcp.LATEST_PROTOCOL_VERSION {
		t.Fatalf("the upstream saw calls %+v, want one in %s", calls, mcp.LATEST_PROTOCOL_VERSION)
	}
}

// TestUpstreamToolWithInvalidHeaderAnnotations: a modern upstream that
// lists a tool whose x-mcp-header annotations break the rules (an empty
// header name; the conformance scenario http-invalid-tool-headers lists
// eleven such) neither stops planlock nor reaches the agent: the client
// must exclude such a tool, so it is not listed and a call of it never
// reaches the upstream, even with a plan that names it; the valid tool
// next to it works.
func TestUpstreamToolWithInvalidHeaderAnnotations(t *testing.T) {
	var mu sync.Mutex
	var called []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.NewDecoder(r.Body).Decode(&m)
		if len(m.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var result string
		switch m.Method {
		case "server/discover":
			result = `{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"serverInfo":{"name":"bad-headers","version":"1"}}`
		case "tools/list":
			result = `{"tools":[` +
				`{"name":"valid_tool","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}},"required":["region"]}},` +
				`{"name":"invalid_empty_header","inputSchema":{"type":"object","properties":{"value":{"type":"string","x-mcp-header":""}},"required":["value"]}}]}`
		case "tools/call":
			mu.Lock()
			called = append(called, m.Params.Name)
			mu.Unlock()
			result = `{"content":[{"type":"text","text":"called"}]}`
		default:
			result = `{}`
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
	}))
	t.Cleanup(ts.Close) // after the proxy's cleanup: its listen stream holds a connection open
	p := eraProxy(t, `
plan "headers" {
  goal  = "only valid tools"
  order = "any"
  step "valid" {
    tool      = "valid_tool"
    max_calls = 5
    arg "region" { any = true }
  }
  step "invalid" {
    tool      = "invalid_empty_header"
    max_calls = 5
    arg "value" { any = true }
  }
}`, UpstreamConfig{URL: ts.URL + "/mcp"})
	c := eraClient(t, p, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	if strings.Join(names, ",") != "valid_tool" {
		t.Fatalf("tools/list shows %v, want only valid_tool", names)
	}
	if res, err := callTool(ctx, c, "valid_tool", map[string]any{"region": "eu"}); refused(res, err) {
		t.Fatalf("valid_tool: %v %+v", err, res)
	}
	if res, err := callTool(ctx, c, "invalid_empty_header", map[string]any{"value": "x"}); !refused(res, err) {
		t.Fatalf("invalid_empty_header was answered: %+v", res)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(called, ",") != "valid_tool" {
		t.Fatalf("the upstream received calls of %v, want only valid_tool", called)
	}
}

// TestSlowModernHTTPUpstreamIsModern: a modern-only HTTP upstream that
// answers server/discover later than the stdio probe's bound (a loaded
// machine) is still spoken to in 2026-07-28: over HTTP every POST is
// answered, so the probe waits as long as initialize would.
func TestSlowModernHTTPUpstreamIsModern(t *testing.T) {
	u, rec := mcpgoUpstream(t, mcp.LATEST_PROTOCOL_VERSION)
	target, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(mcp.HeaderMethod) == string(mcp.MethodServerDiscover) {
			time.Sleep(discoverProbeTimeout + time.Second)
		}
		rec.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close) // after the proxy's cleanup: its listen stream holds a connection open
	p := eraProxy(t, eraPlan, UpstreamConfig{URL: ts.URL + target.Path, InitTimeout: 60 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := eraClient(t, p, "")
	res, err := callTool(ctx, c, "echo", map[string]any{"message": "hi"})
	if refused(res, err) || resultText(res) != "hi" {
		t.Fatalf("call through the slow upstream: %v %+v", err, res)
	}
	if calls := rec.calls(); len(calls) != 1 || calls[0].version != mcp.LATEST_PROTOCOL_VERSION {
		t.Fatalf("the upstream saw calls %+v, want one in %s", calls, mcp.LATEST_PROTOCOL_VERSION)
	}
}
