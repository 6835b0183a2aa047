package proxy

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/internal/testkit/peers"
	"github.com/planlock/planlock/internal/testkit/testplans"
)

// TestLogLevelOfTheRequest: toward an upstream of protocol 2026-07-28 (the
// TypeScript SDK v2 server, which logs for a request only at or above the
// level in its _meta), planlock sends the log level the client asked for:
// a modern client's per-request level (mcp-go's client puts the level of
// its SetLevel in every request's _meta), a legacy client's session level
// (logging/setLevel, error by default); none when a modern client asked for
// none or named an unknown level. The client gets exactly the messages of
// that level and above, through planlock over stdio and HTTP, with the
// upstream over stdio and HTTP.
func TestLogLevelOfTheRequest(t *testing.T) {
	ups := []struct {
		name  string
		start func(t *testing.T) UpstreamConfig
	}{
		{"upstream-stdio", func(t *testing.T) UpstreamConfig { return UpstreamConfig{Command: peers.ModernStdio(t)} }},
		{"upstream-http", func(t *testing.T) UpstreamConfig { return UpstreamConfig{URL: peers.StartModernHTTP(t)} }},
	}
	all := []string{"debug", "info", "error"}
	cases := []struct {
		name, version string
		level         mcp.LoggingLevel // "" sets none
		want          []string
	}{
		{"modern-info", "", "info", []string{"info", "error"}},
		{"modern-debug", "", "debug", all},
		{"modern-none", "", "", nil},
		{"modern-unknown-level", "", "loud", nil},
		{"legacy-default", mcp.LATEST_LEGACY_PROTOCOL_VERSION, "", []string{"error"}},
		{"legacy-debug", mcp.LATEST_LEGACY_PROTOCOL_VERSION, "debug", all},
	}
	for _, up := range ups {
		for _, front := range []string{"stdio", "http"} {
			for _, tc := range cases {
				t.Run(up.name+"/"+front+"/"+tc.name, func(t *testing.T) {
					p := eraProxy(t, testplans.Logs, up.start(t))
					c := eraClientOn(t, p, front, tc.version)
					var mu sync.Mutex
					var got []string
					c.OnNotification(func(n mcp.JSONRPCNotification) {
						if n.Method == "notifications/message" {
							level, _ := n.Params.AdditionalFields["level"].(string)
							mu.Lock()
							got = append(got, level)
							mu.Unlock()
						}
					})
					ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
					defer cancel()
					if tc.level != "" {
						req := mcp.SetLevelRequest{}
						req.Params.Level = tc.level
						//lint:ignore SA1019 the level a client asks for is what is tested
						if err := c.SetLevel(ctx, req); err != nil && tc.version == "" {
							t.Fatalf("set level: %v", err)
						}
					}
					if res, err := callTool(ctx, c, "log", map[string]any{}); refused(res, err) || resultText(res) != "logged" {
						t.Fatalf("log: %v %+v", err, res)
					}
					seen := func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(got) }
					if len(tc.want) > 0 && !eventually(func() bool { return len(seen()) >= len(tc.want) }) {
						t.Fatalf("log messages %v, want %v", seen(), tc.want)
					}
					// A call that logs nothing: what the first call's
					// messages were is settled by its answer.
					if res, err := callTool(ctx, c, "echo", map[string]any{"message": "x"}); refused(res, err) {
						t.Fatalf("echo: %v %+v", err, res)
					}
					if g := seen(); !slices.Equal(g, tc.want) {
						t.Errorf("log messages %v, want %v", g, tc.want)
					}
					// A read asks as a call does. (Over planlock's HTTP front
					// mcp-go's server writes a read's notifications from a
					// goroutine of its own (a legacy session's also on its GET
					// stream), and drops one it has not written when the
					// result is: there the client gets some of them, in any
					// order, never one it did not ask for.)
					mu.Lock()
					got = nil
					mu.Unlock()
					rr := mcp.ReadResourceRequest{}
					rr.Params.URI = "log://note"
					if res, err := c.ReadResource(ctx, rr); err != nil || len(res.Contents) != 1 {
						t.Fatalf("read: %v %+v", err, res)
					}
					enough := len(tc.want)
					if front == "http" {
						enough = min(enough, 1)
					}
					if enough > 0 && !eventually(func() bool { return len(seen()) >= enough }) {
						t.Fatalf("log messages of the read %v, want %v", seen(), tc.want)
					}
					if res, err := callTool(ctx, c, "echo", map[string]any{"message": "y"}); refused(res, err) {
						t.Fatalf("echo: %v %+v", err, res)
					}
					if g := seen(); front == "stdio" && !slices.Equal(g, tc.want) || front == "http" && !someOf(g, tc.want) {
						t.Errorf("log messages of the read %v, want %v", g, tc.want)
					}
				})
			}
		}
	}
}

// someOf reports whether got holds one or more of want's elements (each at
// most as often as in want, in any order), or is empty when want is.
func someOf(got, want []string) bool {
	if len(got) == 0 {
		return len(want) == 0
	}
	left := slices.Clone(want)
	for _, g := range got {
		i := slices.Index(left, g)
		if i < 0 {
			return false
		}
		left = slices.Delete(left, i, i+1)
	}
	return true
}
