package proxy

import (
	"context"
	"encoding/json"
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
