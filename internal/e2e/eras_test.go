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
