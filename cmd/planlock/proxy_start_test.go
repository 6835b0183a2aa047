package main

import (
	"context"
	"io"
	"net"
	"net/http"
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

// TestStartFailureReachesRealClientsOverHTTP: over streamable HTTP too,
// mcp-go v1.2.1's client of 2026-07-28 (server/discover first) and of
// 2025-11-25 (initialize) learn why the proxy cannot start, and so does a
// raw modern server/discover; a request without the listen token learns
// nothing.
func TestStartFailureReachesRealClientsOverHTTP(t *testing.T) {
	const reason = "planlock proxy cannot start: upstream http://up/mcp: it refused protocol version 2026-07-28"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		serveStartFailure(ln, "tok", nil, reason, "/state/proxy.log", 60*time.Second)
	}()
	url := "http://" + ln.Addr().String() + "/mcp"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, version := range []string{"", mcp.LATEST_LEGACY_PROTOCOL_VERSION} {
		t.Run("version "+version, func(t *testing.T) {
			tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer tok"}))
			if err != nil {
				t.Fatal(err)
			}
			c := client.NewClient(tr)
			defer c.Close()
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			init := mcp.InitializeRequest{}
			init.Params.ProtocolVersion = version
			init.Params.ClientInfo = mcp.Implementation{Name: "real", Version: "1"}
			_, err = c.Initialize(ctx, init)
			if err == nil || !strings.Contains(err.Error(), reason) {
				t.Errorf("initialize: %v, want the reason %q", err, reason)
			}
		})
	}
	post := func(token string) (int, string) {
		body := `{"jsonrpc":"2.0","id":"d-1","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
		req.Header.Set(mcp.HeaderMethod, "server/discover")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := post("tok")
	want := `{"error":{"code":-32603,"data":{"log":"/state/proxy.log"},"message":"` + reason + `"},"id":"d-1","jsonrpc":"2.0"}`
	if code != http.StatusOK || body != want {
		t.Errorf("server/discover: %d %s, want 200 %s", code, body, want)
	}
	for _, token := range []string{"", "wrong"} {
		if code, body := post(token); code != http.StatusUnauthorized || strings.Contains(body, "refused") {
			t.Errorf("token %q: %d %s, want 401 without the reason", token, code, body)
		}
	}
	ln.Close() // ends the wait early; serveStartFailure returns after its timer either way
	cancel()
}
