package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"
)

// allocated is the bytes allocated on the heap so far (all goroutines).
func allocated() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// An upstream answer past the limit fails its request at once with an
// error that says so, and costs about the limit in memory, not its size:
// the line is dropped as it streams. Over stdio the test upstream writes a
// 256 MiB line that never ends; the limit is 1 MiB.
func TestUpstreamStdioLineIsBounded(t *testing.T) {
	const huge, limit = 256 << 20, 1 << 20
	for _, async := range []bool{true, false} {
		name := "Request"
		if async {
			name = "Go"
		}
		t.Run(name, func(t *testing.T) {
			u := runUpstream(t, UpstreamConfig{Command: []string{testUpstreamBin, "--mode", "huge", "--huge-bytes", "268435456"}, MaxMessageBytes: limit})
			runtime.GC()
			before := allocated()
			var err error
			if async {
				o := newOutcome()
				if _, err := u.Go("tools/call", echoParams("hi"), o.done); err != nil {
					t.Fatal(err)
				}
				err = waitErr(t, o)
			} else {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_, err = u.Request(ctx, "tools/call", echoParams("hi"))
			}
			var big errUpstreamTooLarge
			if !errors.As(err, &big) || !strings.Contains(err.Error(), "larger than the limit of 1048576 bytes") {
				t.Fatalf("got %v, want the answer refused as too large", err)
			}
			got := allocated() - before
			if got > huge/8 {
				t.Fatalf("allocated %d MiB for a %d MiB line past a %d MiB limit", got>>20, huge>>20, limit>>20)
			}
			t.Logf("a %d MiB line past a %d MiB limit: %.1f MiB allocated", huge>>20, limit>>20, float64(got)/(1<<20))
		})
	}
}

// The HTTP upstream's JSON answer past the limit: the request fails with
// the same error, having read about the limit.
func TestUpstreamHTTPBodyIsBounded(t *testing.T) {
	const limit = 1 << 20
	u := runUpstream(t, UpstreamConfig{URL: httpTestUpstream(t), MaxMessageBytes: limit})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := u.Request(ctx, "tools/call", json.RawMessage(`{"name":"big","arguments":{"bytes":1000}}`)); err != nil {
		t.Fatalf("a small answer: %v", err)
	}
	runtime.GC()
	before := allocated()
	_, err := u.Request(ctx, "tools/call", json.RawMessage(`{"name":"big","arguments":{"bytes":134217728}}`))
	if err == nil || !strings.Contains(err.Error(), "larger than the limit of 1048576 bytes") {
		t.Fatalf("got %v, want the answer refused as too large", err)
	}
	got := allocated() - before
	if got > 16<<20 {
		t.Fatalf("allocated %d MiB for a 128 MiB answer past a 1 MiB limit", got>>20)
	}
	t.Logf("a 128 MiB answer past a 1 MiB limit: %.1f MiB allocated", float64(got)/(1<<20))
	// The connection still serves.
	if _, err := u.Request(ctx, "tools/call", json.RawMessage(`{"name":"echo","arguments":{"message":"again"}}`)); err != nil {
		t.Fatalf("after the refused answer: %v", err)
	}
}

// limitedBody bounds a JSON body whole and an SSE stream per event.
func TestLimitedBody(t *testing.T) {
	ev := func(n int) string { return "event: message\ndata: " + strings.Repeat("x", n) + "\n\n" }
	tests := []struct {
		name string
		sse  bool
		body string
		fail bool
	}{
		{"json under", false, strings.Repeat("x", 100), false},
		{"json at", false, strings.Repeat("x", 128), false},
		{"json over", false, strings.Repeat("x", 129), true},
		{"sse events each under, many", true, strings.Repeat(ev(90), 50), false},
		{"sse crlf events", true, strings.Repeat(strings.ReplaceAll(ev(90), "\n", "\r\n"), 50), false},
		{"sse one event over", true, ev(90) + ev(200) + ev(10), true},
		{"sse one line never ends", true, "data: " + strings.Repeat("x", 10000), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &limitedBody{rc: io.NopCloser(iotest1(strings.NewReader(tt.body))), max: 128, sse: tt.sse}
			got, err := io.ReadAll(b)
			var big errUpstreamTooLarge
			if tt.fail != errors.As(err, &big) {
				t.Fatalf("read %d bytes, err %v; want failure %v", len(got), err, tt.fail)
			}
			if !tt.fail && string(got) != tt.body {
				t.Fatal("body changed")
			}
		})
	}
}

// iotest1 reads in small pieces, so that limits fall inside reads.
func iotest1(r io.Reader) io.Reader { return &smallReader{r} }

type smallReader struct{ r io.Reader }

func (s *smallReader) Read(p []byte) (int, error) {
	if len(p) > 7 {
		p = p[:7]
	}
	return s.r.Read(p)
}
