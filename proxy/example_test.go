package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/proxy"
	"github.com/planlock/planlock/proxy/ledger"
)

// A program that serves a gate inside its own HTTP server: it parses the
// plan (a real one would load it verified, package planload), opens the
// state, and mounts the proxy behind its own authentication, which passes
// the caller with WithCaller.
func ExampleProxy_Mount() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The upstream MCP server: one echo tool, over streamable HTTP.
	up := server.NewMCPServer("echo-server", "1")
	up.AddTool(mcp.NewTool("echo", mcp.WithString("message")), func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(r.GetString("message", "")), nil
	})
	upstream := httptest.NewServer(server.NewStreamableHTTPServer(up))
	defer upstream.Close()

	plan, diags := hclplan.Parse("echo.hcl", []byte(`
plan "echo" {
  goal = "say hello once"
  step "say" {
    tool = "echo"
    arg "message" { eq = "hello" }
  }
}
`))
	if diags.HasErrors() {
		fmt.Println(diags)
		return
	}
	dir, _ := os.MkdirTemp("", "planlock-example")
	defer os.RemoveAll(dir)
	state, err := ledger.Open(ctx, ledger.Options{Dir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer state.Close()
	p, err := proxy.New(proxy.Config{Plan: plan, State: state, Upstream: proxy.UpstreamConfig{URL: upstream.URL + "/mcp"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	gate := p.Mount(ctx, "/mcp") // the upstream starts on the first request, ends with ctx
	defer gate.Stop()
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" { // the program's own authentication
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		gate.ServeHTTP(w, r.WithContext(proxy.WithCaller(r.Context(), "token:example")))
	}))
	defer front.Close()

	// An agent.
	tr, _ := transport.NewStreamableHTTP(front.URL+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer s3cret"}))
	agent := client.NewClient(tr)
	if err := agent.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer agent.Close()
	if _, err := agent.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		fmt.Println(err)
		return
	}
	for _, msg := range []string{"goodbye", "hello", "hello"} {
		req := mcp.CallToolRequest{}
		req.Params.Name = "echo"
		req.Params.Arguments = map[string]any{"message": msg}
		res, err := agent.CallTool(ctx, req)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: error=%v %s\n", msg, res.IsError, res.Content[0].(mcp.TextContent).Text)
	}
	// Output:
	// goodbye: error=true blocked by plan "echo": step "say": argument "message" = "goodbye", want "hello"
	// hello: error=false hello
	// hello: error=true blocked by plan "echo": step "say": max_calls 1 used up (1 calls forwarded)
}
