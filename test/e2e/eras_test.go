//go:build e2e

package e2e

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/internal/testkit/peers"
)

// TestHTTPProxyThatCannotStartAnswersWhy: planlock proxy --listen in front
// of an upstream that speaks no protocol version planlock speaks does not
// start, and does not retry it: mcp-go v1.2.1's client of 2026-07-28 (its
// default, server/discover first) and of 2025-11-25 (initialize) get the
// reason over HTTP, naming the upstream and the versions, and the process
// exits 1.
func TestHTTPProxyThatCannotStartAnswersWhy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the proxy binds it next
	dir := t.TempDir()
	cmd := exec.Command(planlockBin, "proxy", "--plan", writePlan(t, refundPlan), "--insecure-skip-verify",
		"--state", filepath.Join(dir, "state"), "--listen", addr, "--", testUpstreamBin, "--mode", "refuse-versions")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const want = "planlock proxy cannot start: upstream " // then the command line
	for _, version := range []string{"", mcp.LATEST_LEGACY_PROTOCOL_VERSION} {
		var got error
		// The proxy listens once its start failed; until then the
		// connection is refused.
		for ctx.Err() == nil {
			tr, err := transport.NewStreamableHTTP("http://" + addr + "/mcp")
			if err != nil {
				t.Fatal(err)
			}
			c := client.NewClient(tr)
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			init := mcp.InitializeRequest{}
			init.Params.ProtocolVersion = version
			init.Params.ClientInfo = mcp.Implementation{Name: "e2e", Version: "1"}
			_, got = c.Initialize(ctx, init)
			c.Close()
			if got != nil && strings.Contains(got.Error(), "connection refused") {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			break
		}
		msg := ""
		if got != nil {
			msg = got.Error()
		}
		for _, w := range []string{want, "testupstream --mode refuse-versions: it refused protocol version 2026-07-28 and supports 2099-01-01; planlock speaks 2026-07-28, 2025-11-25"} {
			if !strings.Contains(msg, w) {
				t.Errorf("client %q: initialize = %v, want the reason with %q\nstderr: %s", version, got, w, stderr.String())
			}
		}
	}
	select {
	case err := <-exited:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("proxy exited with %v, want 1\n%s", err, stderr.String())
		}
		exited <- err // for the cleanup
	case <-ctx.Done():
		t.Fatalf("the proxy did not exit\n%s", stderr.String())
	}
}

// modernOnlyPlan allows echo twice, with a message of at most 10 characters.
const modernOnlyPlan = `
plan "modern-only" {
  goal  = "echo through an upstream of protocol 2026-07-28 only"
  order = "any"
  step "echo" {
    tool      = "echo"
    max_calls = 2
    arg "message" { max_length = 10 }
  }
}`

// TestSDKAgentThroughProxyToAModernOnlyServer: the official SDK's agent,
// through planlock proxy over stdio, uses the TypeScript SDK v2 server with
// legacy requests rejected (protocol 2026-07-28 only), over stdio and
// HTTP, with the plan enforced: two echoes reach it, a too-long one, a
// tool outside the plan and a third echo do not.
func TestSDKAgentThroughProxyToAModernOnlyServer(t *testing.T) {
	for _, over := range []string{"stdio", "http"} {
		t.Run(over, func(t *testing.T) {
			dir := t.TempDir()
			calls := filepath.Join(dir, "calls.jsonl")
			server := []string{"node", filepath.Join(peersDir(t), "modern-server.mjs"), "--calls-log", calls}
			args := []string{"--", planlockBin, "proxy", "--plan", writePlan(t, modernOnlyPlan), "--insecure-skip-verify",
				"--state", filepath.Join(dir, "state")}
			if over == "stdio" {
				args = append(append(args, "--"), server...)
			} else {
				args = append(args, "--upstream-url", peers.StartListening(t, append(server, "--http"), nil))
			}
			lines := runAgent(t, nil, `[
 {"op":"listTools"},
 {"op":"callTool","name":"echo","arguments":{"message":"hello"}},
 {"op":"callTool","name":"echo","arguments":{"message":"far longer than ten"}},
 {"op":"callTool","name":"add","arguments":{"a":2,"b":3}},
 {"op":"callTool","name":"echo","arguments":{"message":"again"}},
 {"op":"callTool","name":"echo","arguments":{"message":"third"}}
]`, args...)
			wantText(t, lines, "1", false, "hello")
			wantText(t, lines, "2", true, `more than the maximum length 10`)
			wantText(t, lines, "3", true, `add`)
			wantText(t, lines, "4", false, "again")
			wantText(t, lines, "5", true, `max_calls`)
			if got := peers.ReadCalls(t, calls); len(got) != 2 {
				t.Fatalf("the upstream got %d tools/call, want 2: %+v", len(got), got)
			}
		})
	}
}
