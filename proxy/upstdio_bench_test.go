package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"testing"
)

// BenchmarkUpstreamCall is one sequential tools/call of the test upstream's
// echo at a time: request waits in Upstream.Request, go is answered by the
// callback of Upstream.Go (the benchmark alone waits for it on a channel).
func BenchmarkUpstreamCall(b *testing.B) {
	params := json.RawMessage(`{"name":"echo","arguments":{"message":"hello"}}`)
	b.Run("request", func(b *testing.B) {
		u := benchUpstream(b)
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if _, err := u.Request(ctx, "tools/call", params); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("go", func(b *testing.B) {
		u := benchUpstream(b)
		answers := make(chan error, 1)
		done := func(_ json.RawMessage, err error) { answers <- err }
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if _, err := u.Go("tools/call", params, done); err != nil {
				b.Fatal(err)
			}
			if err := <-answers; err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchUpstream runs the test upstream until the benchmark ends, warmed up.
func benchUpstream(b *testing.B) *Upstream {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	env, _ := UpstreamEnv(nil, func(string) (string, bool) { return "", false })
	u := newUpstream(UpstreamConfig{Command: []string{testUpstreamBin}, Env: env}, nil, nil)
	done := make(chan struct{})
	go func() { defer close(done); u.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	if err := u.WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	for range 50 {
		if _, err := u.Request(ctx, "tools/call", json.RawMessage(`{"name":"echo","arguments":{"message":"hello"}}`)); err != nil {
			b.Fatal(err)
		}
	}
	return u
}

// BenchmarkStdioTransportCat measures the transport alone, with cat as the
// far end: each line sent is an answer to itself, so a round trip costs the
// transport and a bare line copier, nothing else. wait hands each answer
// to the benchmark's goroutine over a channel; chain sends the next request
// from done, on the reader goroutine, as the stdio fast lane does (no
// goroutine hand-off at all).
func BenchmarkStdioTransportCat(b *testing.B) {
	start := func(b *testing.B) *stdioTransport {
		cmd := exec.Command("cat")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		tr := newStdioTransport(cmd, io.Discard, slog.New(slog.DiscardHandler))
		if err := tr.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = tr.Close() })
		return tr
	}
	line := func(id int64) []byte {
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"hello"}]}}`+"\n", id)
	}
	b.Run("wait", func(b *testing.B) {
		tr := start(b)
		answers := make(chan error, 1)
		done := func(_ json.RawMessage, _ *RPCError, err error) { answers <- err }
		b.ReportAllocs()
		b.ResetTimer()
		for i := range int64(b.N) {
			if err := tr.SendAsync(i, line(i), done); err != nil {
				b.Fatal(err)
			}
			if err := <-answers; err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("chain", func(b *testing.B) {
		tr := start(b)
		finished := make(chan error, 1)
		var send func(i int64)
		send = func(i int64) {
			if i == int64(b.N) {
				finished <- nil
				return
			}
			if err := tr.SendAsync(i, line(i), func(_ json.RawMessage, _ *RPCError, err error) {
				if err != nil {
					finished <- err
					return
				}
				send(i + 1)
			}); err != nil {
				finished <- err
			}
		}
		b.ReportAllocs()
		b.ResetTimer()
		send(0)
		if err := <-finished; err != nil {
			b.Fatal(err)
		}
	})
}
