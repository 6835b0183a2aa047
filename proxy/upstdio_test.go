package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/planlock/planlock/internal/wire"
)

// runUpstream runs an Upstream of cfg until the test ends and waits until it
// is connected.
func runUpstream(t *testing.T, cfg UpstreamConfig) *Upstream {
	t.Helper()
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	ctx, cancel := context.WithCancel(context.Background())
	u := newUpstream(cfg, nil, nil)
	done := make(chan struct{})
	go func() { defer close(done); u.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := u.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	return u
}

// testUpstream runs the test upstream (internal/testkit/testupstream) in mode.
func testUpstream(t *testing.T, mode string, extra ...string) *Upstream {
	t.Helper()
	return runUpstream(t, UpstreamConfig{Command: append([]string{testUpstreamBin, "--mode", mode}, extra...)})
}

// scriptedUpstream runs a shell script as the upstream: a faithful stand-in
// for a server that answers exactly what the script prints, for the answers
// a real MCP server does not give (no result nor error, answers after a
// cancellation). It answers the server/discover probe (id -1) as a legacy
// server does, initialize (id 1) and tools/list (id 2) first,
// so the Upstream's own requests start at id 3; then it runs body, in which
// `take` reads one line and appends it to the file $LOG. It returns the
// Upstream and the log's path.
func scriptedUpstream(t *testing.T, body string) (*Upstream, string) {
	t.Helper()
	log := filepath.Join(t.TempDir(), "received.jsonl")
	script := `take() { IFS= read -r l || exit 0; printf '%s\n' "$l" >> "$LOG"; }
take; echo '{"jsonrpc":"2.0","id":-1,"error":{"code":-32601,"message":"Method not found"}}'
take; echo '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{}}}'
take
take; echo '{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}'
` + body + `
exec cat >/dev/null
`
	u := runUpstream(t, UpstreamConfig{Command: []string{"/bin/sh", "-c", script},
		Env: []string{"PATH=" + os.Getenv("PATH"), "LOG=" + log}})
	return u, log
}

// outcome is what one done received.
type outcome struct {
	res   json.RawMessage
	err   error
	calls atomic.Int32
	ran   chan struct{}
}

func newOutcome() *outcome { return &outcome{ran: make(chan struct{})} }

func (o *outcome) done(res json.RawMessage, err error) {
	if o.calls.Add(1) == 1 {
		o.res, o.err = res, err
		close(o.ran)
	}
}

func (o *outcome) wait(t *testing.T) {
	t.Helper()
	select {
	case <-o.ran:
	case <-time.After(30 * time.Second):
		t.Fatal("done never ran")
	}
}

func echoParams(msg string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"name":"echo","arguments":{"message":%q}}`, msg))
}

func TestUpstreamGoAnswers(t *testing.T) {
	u := testUpstream(t, "normal")
	tests := []struct {
		name    string
		method  string
		params  json.RawMessage
		want    string // substring of the result
		wantErr *RPCError
	}{
		{name: "result", method: "tools/call", params: echoParams("hi there"), want: `"text":"hi there"`},
		{name: "params spanning lines", method: "tools/call", params: json.RawMessage("{\n \"name\": \"echo\",\n \"arguments\": {\"message\": \"two\\nlines\"}\n}"), want: `"text":"two\nlines"`},
		{name: "tool error is a result", method: "tools/call", params: json.RawMessage(`{"name":"big","arguments":{"bytes":-1}}`), want: `"isError":true`},
		{name: "json-rpc error", method: "no/such/method", params: json.RawMessage(`{}`), wantErr: &RPCError{Code: mcp.METHOD_NOT_FOUND}},
		{name: "no params", method: "ping", want: `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newOutcome()
			if _, err := u.Go(tt.method, tt.params, o.done); err != nil {
				t.Fatal(err)
			}
			o.wait(t)
			if tt.wantErr != nil {
				var re *RPCError
				if !errors.As(o.err, &re) || re.Code != tt.wantErr.Code {
					t.Fatalf("got %s %v, want an RPCError %d", o.res, o.err, tt.wantErr.Code)
				}
				return
			}
			if o.err != nil || !strings.Contains(string(o.res), tt.want) {
				t.Fatalf("got %s %v, want a result containing %s", o.res, o.err, tt.want)
			}
			// What Request answers for the same request.
			if tt.method == "tools/call" {
				res, err := u.Request(context.Background(), tt.method, tt.params)
				if err != nil || string(res) != string(o.res) {
					t.Fatalf("Request answered %s %v, Go %s", res, err, o.res)
				}
			}
		})
	}
}

func TestUpstreamGoScriptedAnswers(t *testing.T) {
	tests := []struct {
		name   string
		answer string // to id 3
		sh     string // or the shell that prints it
		want   string // the result, or the error's text
	}{
		{name: "neither result nor error", answer: `{"jsonrpc":"2.0","id":3}`, want: "upstream answered with neither result nor error"},
		{name: "error wins over result", answer: `{"jsonrpc":"2.0","id":3,"result":{},"error":{"code":-32000,"message":"no","data":{"x":1}}}`, want: "upstream error -32000: no"},
		{name: "null result", answer: `{"jsonrpc":"2.0","id":3,"result":null}`, want: "null"},
		{name: "integral float id", answer: `{"jsonrpc":"2.0","id":3.0,"result":{"ok":1}}`, want: `{"ok":1}`},
		{name: "garbage lines skipped", answer: "not json\n{\"jsonrpc\":\"2.0\",\"id\":\"3\",\"result\":{\"string id\":1}}\n{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"ok\":2}}", want: `{"ok":2}`},
		{name: "longer than the read buffer", sh: `printf '{"jsonrpc":"2.0","id":3,"result":{"text":"'; head -c 307200 /dev/zero | tr '\0' x; printf '"}}\n'`, want: `{"text":"` + strings.Repeat("x", 300<<10) + `"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sh := tt.sh
			if sh == "" {
				sh = "cat <<'EOF'\n" + tt.answer + "\nEOF"
			}
			u, _ := scriptedUpstream(t, "take\n"+sh)
			o := newOutcome()
			if _, err := u.Go("tools/call", echoParams("x"), o.done); err != nil {
				t.Fatal(err)
			}
			o.wait(t)
			got := string(o.res)
			if o.err != nil {
				got = o.err.Error()
			}
			if got != tt.want {
				if len(got) > 200 {
					got = got[:200] + "..."
				}
				t.Fatalf("got %q", got)
			}
		})
	}
}

// TestUpstreamGoRunsOnTheReader proves there is no goroutine hand-off: done
// runs inside the transport's read loop, and while it runs no other answer
// is read.
func TestUpstreamGoRunsOnTheReader(t *testing.T) {
	u := testUpstream(t, "normal")
	release := make(chan struct{})
	var stack string
	first := newOutcome()
	if _, err := u.Go("tools/call", echoParams("first"), func(res json.RawMessage, err error) {
		buf := make([]byte, 64<<10)
		stack = string(buf[:runtime.Stack(buf, false)])
		first.done(res, err)
		<-release
	}); err != nil {
		t.Fatal(err)
	}
	first.wait(t)
	if !strings.Contains(stack, "(*stdioTransport).readLoop") {
		t.Fatalf("done did not run on the reader goroutine:\n%s", stack)
	}
	// The reader is inside done: a second answer is not read until it returns.
	second := newOutcome()
	if _, err := u.Go("tools/call", echoParams("second"), second.done); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := u.Request(ctx, "tools/call", echoParams("third"))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a request was answered while done blocked the reader: %v", err)
	}
	if second.calls.Load() != 0 {
		t.Fatal("a second done ran while the first blocked the reader")
	}
	close(release)
	second.wait(t)
	if second.err != nil || !strings.Contains(string(second.res), `"second"`) {
		t.Fatalf("second: %s %v", second.res, second.err)
	}
}

func TestUpstreamGoConcurrent(t *testing.T) {
	u := testUpstream(t, "normal")
	const goroutines, each = 16, 20
	var wg sync.WaitGroup
	outs := make([][]*outcome, goroutines)
	for g := range goroutines {
		outs[g] = make([]*outcome, each)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				o := newOutcome()
				outs[g][i] = o
				if _, err := u.Go("tools/call", echoParams(fmt.Sprintf("m-%d-%d", g, i)), o.done); err != nil {
					t.Error(err)
					close(o.ran)
				}
			}
		}()
	}
	wg.Wait()
	for g := range goroutines {
		for i, o := range outs[g] {
			o.wait(t)
			want := fmt.Sprintf(`"text":"m-%d-%d"`, g, i)
			if o.err != nil || !strings.Contains(string(o.res), want) {
				t.Fatalf("%d/%d: got %s %v, want %s", g, i, o.res, o.err, want)
			}
		}
	}
	// Nothing runs twice, even late.
	if _, err := u.Request(context.Background(), "ping", nil); err != nil {
		t.Fatal(err)
	}
	for g := range goroutines {
		for i, o := range outs[g] {
			if n := o.calls.Load(); n != 1 {
				t.Fatalf("%d/%d: done ran %d times", g, i, n)
			}
		}
	}
}

func TestUpstreamGoConnectionLost(t *testing.T) {
	// The process exits on its fourth tools/call, with the other three in
	// flight. All four are slow: the upstream serves calls concurrently, so
	// which of them it counts fourth is not the order they were sent in.
	u := testUpstream(t, "exit-mid-call", "--exit-after", "4")
	var outs []*outcome
	for range 4 {
		params := json.RawMessage(`{"name":"slow","arguments":{"ms":3600000}}`)
		o := newOutcome()
		outs = append(outs, o)
		if _, err := u.Go("tools/call", params, o.done); err != nil {
			t.Fatal(err)
		}
	}
	for i, o := range outs {
		o.wait(t)
		if !errors.Is(o.err, transport.ErrTransportClosed) || o.err.Error() != "upstream connection lost: transport closed" {
			t.Fatalf("call %d: got %s %v, want the connection lost", i, o.res, o.err)
		}
	}
	// Restarted as after any loss; the new connection answers.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		if err := u.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		o := newOutcome()
		_, err := u.Go("tools/call", echoParams("again"), o.done)
		if errors.Is(err, ErrUnavailable) || (err == nil && waitErr(t, o) != nil) {
			continue // the old connection was still current
		}
		if err != nil || !strings.Contains(string(o.res), `"again"`) {
			t.Fatalf("after the restart: %s %v", o.res, err)
		}
		break
	}
	for i, o := range outs {
		if n := o.calls.Load(); n != 1 {
			t.Fatalf("call %d: done ran %d times", i, n)
		}
	}
}

func waitErr(t *testing.T, o *outcome) error {
	o.wait(t)
	return o.err
}

func TestUpstreamGoStop(t *testing.T) {
	t.Run("before the answer", func(t *testing.T) {
		// The upstream answers id 3 only after reading the cancellation, then
		// id 4: once 4's done ran, 3's answer was read and dropped.
		u, log := scriptedUpstream(t, `take; take
echo '{"jsonrpc":"2.0","id":3,"result":{"late":true}}'
take; echo '{"jsonrpc":"2.0","id":4,"result":{"n":4}}'`)
		o := newOutcome()
		stop, err := u.Go("tools/call", echoParams("x"), o.done)
		if err != nil {
			t.Fatal(err)
		}
		if !stop("request timed out") {
			t.Fatal("stop of a pending request returned false")
		}
		if stop("again") {
			t.Fatal("a second stop returned true")
		}
		next := newOutcome()
		if _, err := u.Go("ping", nil, next.done); err != nil {
			t.Fatal(err)
		}
		if err := waitErr(t, next); err != nil {
			t.Fatal(err)
		}
		if n := o.calls.Load(); n != 0 {
			t.Fatalf("done of a stopped request ran %d times", n)
		}
		lines := strings.Split(strings.TrimSpace(readString(log)), "\n")
		if len(lines) != 7 {
			t.Fatalf("upstream received %d lines, want 7 (the server/discover probe first):\n%s", len(lines), strings.Join(lines, "\n"))
		}
		var n mcp.JSONRPCNotification
		if err := json.Unmarshal([]byte(lines[5]), &n); err != nil {
			t.Fatal(err)
		}
		if n.Method != "notifications/cancelled" || fmt.Sprint(n.Params.AdditionalFields["requestId"]) != "3" ||
			n.Params.AdditionalFields["reason"] != "request timed out" {
			t.Fatalf("upstream received %s, want the cancellation of request 3", lines[5])
		}
	})
	t.Run("after the answer", func(t *testing.T) {
		u, log := scriptedUpstream(t, `take; echo '{"jsonrpc":"2.0","id":3,"result":{}}'
take; echo '{"jsonrpc":"2.0","id":4,"result":{}}'`)
		o := newOutcome()
		stop, err := u.Go("tools/call", echoParams("x"), o.done)
		if err != nil {
			t.Fatal(err)
		}
		if err := waitErr(t, o); err != nil {
			t.Fatal(err)
		}
		if stop("too late") {
			t.Fatal("stop after done returned true")
		}
		next := newOutcome()
		if _, err := u.Go("ping", nil, next.done); err != nil {
			t.Fatal(err)
		}
		if err := waitErr(t, next); err != nil {
			t.Fatal(err)
		}
		if got := readString(log); strings.Contains(got, "notifications/cancelled") {
			t.Fatalf("a cancellation was sent for an answered request:\n%s", got)
		}
	})
	t.Run("inside done", func(t *testing.T) {
		// A caller may stop from done (a timer that fires as the answer
		// arrives): no lock is held, and it is too late.
		u := testUpstream(t, "normal")
		var stop func(string) bool
		ready := make(chan struct{})
		stopped := make(chan bool, 1)
		var err error
		stop, err = u.Go("tools/call", echoParams("x"), func(json.RawMessage, error) {
			<-ready
			stopped <- stop("timer")
		})
		if err != nil {
			t.Fatal(err)
		}
		close(ready)
		if <-stopped {
			t.Fatal("stop inside done returned true")
		}
	})
}

func TestUpstreamGoUnavailable(t *testing.T) {
	t.Run("no connection", func(t *testing.T) {
		u := newUpstream(UpstreamConfig{Command: []string{testUpstreamBin}}, nil, nil)
		_, err := u.Go("ping", nil, func(json.RawMessage, error) { t.Error("done ran") })
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("got %v, want ErrUnavailable", err)
		}
	})
	t.Run("http", func(t *testing.T) {
		ts := httptest.NewServer(server.NewStreamableHTTPServer(server.NewMCPServer("h", "1", server.WithToolCapabilities(false))))
		t.Cleanup(ts.Close) // after the upstream's, which ends its stream
		u := runUpstream(t, UpstreamConfig{URL: ts.URL})
		_, err := u.Go("ping", nil, func(json.RawMessage, error) { t.Error("done ran") })
		if !errors.Is(err, ErrNoAsync) {
			t.Fatalf("got %v, want ErrNoAsync", err)
		}
		if _, err := u.Request(context.Background(), "ping", nil); err != nil {
			t.Fatalf("Request over HTTP: %v", err)
		}
	})
}

// startTransport starts a stdioTransport of the shell script until the test
// ends.
func startTransport(t *testing.T, script string) *stdioTransport {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	var logBuf bytes.Buffer
	tr := newStdioTransport(cmd, io.Discard, slog.New(slog.NewTextHandler(&logBuf, nil)))
	if err := tr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

func TestStdioTransportClosed(t *testing.T) {
	tests := []struct {
		name   string
		script string
	}{
		{name: "exited", script: "exit 0"},
		{name: "stdout closed", script: "exec >&-; exec cat >/dev/null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := startTransport(t, tt.script)
			// Pending and waiting: fails once the output ends.
			_, err := tr.SendRequest(context.Background(), transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(int64(1)), Method: "ping"})
			if !errors.Is(err, transport.ErrTransportClosed) {
				t.Fatalf("SendRequest: %v, want ErrTransportClosed", err)
			}
			err = tr.SendAsync(2, []byte(`{"jsonrpc":"2.0","id":2,"method":"ping"}`), func(json.RawMessage, *RPCError, error) { t.Error("done ran") })
			if !errors.Is(err, transport.ErrTransportClosed) {
				t.Fatalf("SendAsync: %v, want ErrTransportClosed", err)
			}
			if tr.Forget(2) {
				t.Fatal("Forget of a request never sent returned true")
			}
		})
	}
	t.Run("close fails pending", func(t *testing.T) {
		// Reads and never answers; its stdout stays open until Close
		// ends its stdin (a command with stdout on /dev/null would end the
		// transport at once).
		tr := startTransport(t, "while read -r line; do :; done")
		var calls atomic.Int32
		got := make(chan error, 1)
		if err := tr.SendAsync(1, []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n"), func(_ json.RawMessage, _ *RPCError, err error) {
			calls.Add(1)
			got <- err
		}); err != nil {
			t.Fatal(err)
		}
		if err := tr.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-got; !errors.Is(err, transport.ErrTransportClosed) {
			t.Fatalf("done got %v", err)
		}
		_ = tr.Close()
		if n := calls.Load(); n != 1 {
			t.Fatalf("done ran %d times", n)
		}
	})
}

func TestRequestLine(t *testing.T) {
	tests := []struct {
		method  string
		params  string
		want    string
		wantErr string
	}{
		{method: "tools/call", params: `{"name":"echo"}`, want: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}`},
		{method: "ping", want: `{"jsonrpc":"2.0","id":7,"method":"ping"}`},
		{method: "odd \"method\"\n", params: `[]`, want: `{"jsonrpc":"2.0","id":7,"method":"odd \"method\"\n","params":[]}`},
		{method: "tools/call", params: "{\n  \"a\": \"x\\ny\"\n}", want: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"a":"x\ny"}}`},
		{method: "tools/call", params: "{\n", wantErr: "params: unexpected end of JSON input"},
	}
	for _, tt := range tests {
		got, err := wire.RequestLine(7, tt.method, json.RawMessage(tt.params))
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("%q %q: got %q %v, want error %q", tt.method, tt.params, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || string(got) != tt.want+"\n" || !json.Valid(got) {
			t.Errorf("%q %q: got %q %v, want %s", tt.method, tt.params, got, err, tt.want)
		}
	}
}

func TestTailLine(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes []string
		want   string
	}{
		{"nothing", nil, ""},
		{"one line", []string{"boom\n"}, "boom"},
		{"last complete line", []string{"a\nb\n"}, "b"},
		{"blank lines skipped", []string{"cause\n\n  \n"}, "cause"},
		{"final line without newline", []string{"a\npart"}, "part"},
		{"split across writes", []string{"Err", "or: x", "\n"}, "Error: x"},
		{"long line cut", []string{strings.Repeat("x", 3*tailLineMax) + "\n"}, strings.Repeat("x", tailLineMax)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l tailLine
			for _, w := range tc.writes {
				l.write([]byte(w))
			}
			if got := l.line(); got != tc.want {
				t.Errorf("line() = %q, want %q", got, tc.want)
			}
		})
	}
}

// stallAfterWrite writes through, then returns only once the upstream has
// exited and a moment more: the writer descheduled right after write(2), as
// a loaded machine does, while the reader sees the upstream's end.
type stallAfterWrite struct {
	w   io.Writer
	pid func() int
}

func (s stallAfterWrite) Write(b []byte) (int, error) {
	n, err := s.w.Write(b)
	for range 5000 {
		if exitedNow(s.pid()) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	return n, err
}

// An upstream that read the request and then exited may have run it, even
// when the write that sent it has not returned yet when the end is seen:
// what it read is counted from the pipe's contents against every byte
// written, not against the bytes whose writes have returned.
func TestUnreadCountsWritesStillReturning(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("what a pipe holds is asked on Linux only")
	}
	tests := []struct {
		name    string
		script  string
		notSent bool
	}{
		{name: "read, then exited", script: "IFS= read -r l; exit 0", notSent: false},
		{name: "exited unread", script: "sleep 0.3; exit 0", notSent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := startTransport(t, tt.script)
			tr.wmu.Lock()
			tr.w = stallAfterWrite{w: tr.w, pid: func() int { return tr.cmd.Process.Pid }}
			tr.wmu.Unlock()
			got := make(chan error, 1)
			err := tr.SendAsync(1, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`+"\n"), func(_ json.RawMessage, _ *RPCError, err error) { got <- err })
			if err != nil && !tt.notSent {
				t.Fatalf("SendAsync: %v", err)
			}
			if err == nil {
				select {
				case err = <-got:
				case <-time.After(30 * time.Second):
					t.Fatal("the request never failed")
				}
			}
			if !errors.Is(err, transport.ErrTransportClosed) {
				t.Fatalf("got %v, want the connection lost", err)
			}
			if IsNotSent(err) != tt.notSent {
				t.Fatalf("got %v: not sent = %v, want %v", err, IsNotSent(err), tt.notSent)
			}
		})
	}
}
