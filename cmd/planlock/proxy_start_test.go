package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// TestStartFailureReachesRealClients: mcp-go v1.2.1's client, of protocol
// 2026-07-28 (its default: server/discover first, then initialize when
// that fails) and of 2025-11-25 (initialize), learns why a proxy that
// cannot start stopped, instead of "connection closed".
func TestStartFailureReachesRealClients(t *testing.T) {
	const reason = "planlock proxy cannot start: plan a.hcl refused: bundle missing"
	for _, version := range []string{"", mcp.LATEST_LEGACY_PROTOCOL_VERSION} {
		t.Run("version "+version, func(t *testing.T) {
			cr, pw := io.Pipe()
			pr, cw := io.Pipe()
			done := make(chan struct{})
			go func() {
				defer close(done)
				defer cw.Close() // the process ends
				answerInitialize(cr, cw, reason, "/state/proxy.log", 20*time.Second)
			}()
			c := client.NewClient(transport.NewIO(pr, pw, io.NopCloser(strings.NewReader(""))))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			init := mcp.InitializeRequest{}
			init.Params.ProtocolVersion = version
			init.Params.ClientInfo = mcp.Implementation{Name: "real", Version: "1"}
			_, err := c.Initialize(ctx, init)
			if err == nil || !strings.Contains(err.Error(), reason) {
				t.Errorf("initialize: %v, want the reason %q", err, reason)
			}
			pw.Close()
			<-done
			c.Close()
		})
	}
}
