// Command passthrough is a bare MCP pass-through proxy built with mcp-go: no
// policy, no state. It is the floor planlock's proxy is benchmarked against
// (the cost of one extra hop on the same library).
//
//	passthrough [--http ADDR] [--upstream-url URL] [-- UPSTREAM_CMD ARGS...]
//	passthrough --floor lines|json -- UPSTREAM_CMD ARGS...
//	passthrough --floor sync --floor-journal FILE -- UPSTREAM_CMD ARGS...
//
// Downstream: stdio by default, streamable HTTP at http://ADDR/mcp with --http.
// Upstream: the command after "--" over stdio, or --upstream-url.
// It relays tools/list (read raw, every page) and tools/call (raw arguments,
// raw result); nothing else is exposed, and notifications and server-to-client
// requests are not relayed.
//
// Benchmarks against the direct upstream (sequential p50, and 16 concurrent
// HTTP clients): go test -run NONE -bench . ./bench/passthrough
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/planlock/planlock/internal/mcpserve"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "passthrough: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, in io.Reader, out, errw io.Writer) error {
	fs := flag.NewFlagSet("passthrough", flag.ContinueOnError)
	fs.SetOutput(errw)
	httpAddr := fs.String("http", "", "serve streamable HTTP on `ADDR` instead of stdio")
	upstreamURL := fs.String("upstream-url", "", "streamable HTTP `URL` of the upstream")
	floor := fs.String("floor", "", "instead of relaying MCP, copy stdio `MODE` lines (lines), JSON messages (json) or lines with each client line made durable first (sync) to and from the upstream command (floor.go)")
	floorJournal := fs.String("floor-journal", "", "with --floor sync, the `FILE` each line from the client is appended to and fdatasynced before it is passed on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cmd := fs.Args()
	if *floor != "" || *floorJournal != "" {
		return runFloor(ctx, *floor, *floorJournal, cmd, in, out, errw)
	}
	if (*upstreamURL == "") == (len(cmd) == 0) {
		//lint:ignore ST1005 the message ends with the usage's ARGS..., as planlock's own do
		return errors.New("give exactly one upstream: --upstream-url URL or -- COMMAND ARGS...")
	}
	up, err := dial(ctx, *upstreamURL, cmd, errw)
	if err != nil {
		return err
	}
	defer up.Close()
	s, err := newProxy(ctx, up)
	if err != nil {
		return err
	}
	return mcpserve.Serve(ctx, s, mcpserve.Options{HTTPAddr: *httpAddr, Stdin: in, Stdout: out, Log: errw})
}

// dial connects to and initialises the upstream.
func dial(ctx context.Context, url string, cmd []string, errw io.Writer) (*client.Client, error) {
	var c *client.Client
	var err error
	if url != "" {
		c, err = client.NewStreamableHttpClient(url)
		if err == nil {
			err = c.Start(ctx)
		}
	} else {
		c, err = client.NewStdioMCPClientWithOptions(cmd[0], os.Environ(), cmd[1:], transport.WithCommandStderrWriter(errw))
	}
	if err != nil {
		return nil, fmt.Errorf("start upstream: %w", err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = protocolVersion
	init.Params.ClientInfo = mcp.Implementation{Name: "passthrough", Version: "1.0.0"}
	if _, err := c.Initialize(ctx, init); err != nil {
		c.Close()
		return nil, fmt.Errorf("initialise upstream: %w", err)
	}
	return c, nil
}

// protocolVersion is asked of the upstream. mcp-go's latest (2026-07-28)
// requires a _meta protocol version on every HTTP request, which raw
// requests would have to add; 2025-11-25 is what current clients speak.
const protocolVersion = "2025-11-25"

type proxy struct {
	up  transport.Interface
	ids atomic.Int64
}

// call sends one raw request upstream. IDs are strings so they never collide
// with the integer IDs the mcp-go client uses for its own requests.
func (p *proxy) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id := mcp.NewRequestId("pt-" + strconv.FormatInt(p.ids.Add(1), 10))
	resp, err := p.up.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Method: method, Params: params})
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %w", method, err)
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("upstream %s: %d %s", method, resp.Error.Code, resp.Error.Message)
	}
	return resp.Result, nil
}

func newProxy(ctx context.Context, up *client.Client) (*server.MCPServer, error) {
	p := &proxy{up: up.GetTransport()}
	tools, err := p.listTools(ctx)
	if err != nil {
		return nil, err
	}
	s := server.NewMCPServer("passthrough", "1.0.0", server.WithToolCapabilities(false))
	for _, t := range tools {
		s.AddTool(t, p.forward)
	}
	return s, nil
}

// listTools reads tools/list raw, following nextCursor, and keeps each
// schema's bytes: the typed ListTools would drop keywords it does not model.
func (p *proxy) listTools(ctx context.Context) ([]mcp.Tool, error) {
	var tools []mcp.Tool
	cursor := ""
	for {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		raw, err := p.call(ctx, string(mcp.MethodToolsList), params)
		if err != nil {
			return nil, err
		}
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, fmt.Errorf("upstream tools/list: %w", err)
		}
		for _, rt := range page.Tools {
			t, err := rawTool(rt)
			if err != nil {
				return nil, err
			}
			tools = append(tools, t)
		}
		if page.NextCursor == "" {
			return tools, nil
		}
		cursor = page.NextCursor
	}
}

func rawTool(rt json.RawMessage) (mcp.Tool, error) {
	var t mcp.Tool
	if err := json.Unmarshal(rt, &t); err != nil {
		return t, fmt.Errorf("upstream tool: %w", err)
	}
	var schemas struct {
		Input  json.RawMessage `json:"inputSchema"`
		Output json.RawMessage `json:"outputSchema"`
	}
	if err := json.Unmarshal(rt, &schemas); err != nil {
		return t, fmt.Errorf("upstream tool %s: %w", t.Name, err)
	}
	t.InputSchema = mcp.ToolInputSchema{}
	t.RawInputSchema = schemas.Input
	if len(schemas.Output) > 0 {
		t.OutputSchema = mcp.ToolOutputSchema{}
		t.RawOutputSchema = schemas.Output
	}
	return t, nil
}

func (p *proxy) forward(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	params := map[string]any{"name": req.Params.Name}
	if args := req.GetRawArguments(); args != nil {
		params["arguments"] = args
	}
	raw, err := p.call(ctx, string(mcp.MethodToolsCall), params)
	if err != nil {
		return nil, err
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("upstream tools/call result: %w", err)
	}
	return &res, nil
}
