package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/testkit/testplans"
	"github.com/planlock/planlock/proxy/ledger"
)

const testPlan = testplans.Faults

func faultHarness(t *testing.T, mode string, timeout time.Duration, extra ...string) *harness {
	t.Helper()
	dir := t.TempDir()
	log := dir + "/calls.jsonl"
	cmd := append([]string{testUpstreamBin, "--mode", mode, "--calls-log", log}, extra...)
	h := newHarness(t, testPlan, harnessOpts{command: cmd, callTimeout: timeout})
	h.callsLog = log
	return h
}

func TestUpstreamFaults(t *testing.T) {
	tests := []struct {
		mode    string
		extra   []string
		want    string // substring of the answer to the first echo
		counted int    // calls counted by the ledger
	}{
		// The cause first: that the upstream exited, how, and what it said last.
		{mode: "exit-at-start", want: `the upstream exited at start with exit status 3; its last stderr line: "testupstream: exiting at start as asked": the call was not forwarded and not counted`, counted: 0},
		{mode: "hang", want: "upstream unavailable, the call was not forwarded and not counted", counted: 0},
		{mode: "garbage", want: "upstream unavailable, the call was not forwarded and not counted", counted: 0},
		{mode: "exit-mid-call", want: `upstream connection lost: transport closed; the call was counted (step "echo", 1 of max_calls 10) and may or may not have run`, counted: 1},
		{mode: "hang-call", want: `upstream did not answer within 1s; the call was counted (step "echo", 1 of max_calls 10)`, counted: 1},
		{mode: "garbage-call", want: `upstream did not answer within 1s; the call was counted (step "echo", 1 of max_calls 10)`, counted: 1},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			h := faultHarness(t, tt.mode, time.Second, tt.extra...)
			text, isErr := h.call("echo", `{"message":"hi"}`)
			if !isErr || !strings.Contains(text, tt.want) {
				t.Fatalf("got %v %q\nwant an error containing %q", isErr, text, tt.want)
			}
			if got := h.ledger.Progress(h.plan.Digest).Calls(0); got != tt.counted {
				t.Fatalf("counted %d, want %d", got, tt.counted)
			}
			if got := h.upstreamCalls()["echo"]; got != tt.counted {
				t.Fatalf("upstream received %d, want %d (the count matches what reached it)", got, tt.counted)
			}
			// The proxy keeps serving.
			if _, err := h.client.ListTools(h.ctx, mcp.ListToolsRequest{}); err != nil {
				t.Fatalf("proxy stopped answering: %v", err)
			}
			h.verifyAudit()
		})
	}
}

func TestCrashedUpstreamIsRestarted(t *testing.T) {
	h := faultHarness(t, "exit-mid-call", 10*time.Second)
	for i := 1; i <= 3; i++ {
		// Each process dies on its first call; the proxy restarts it.
		if err := h.proxy.WaitUpstream(h.ctx); err != nil {
			t.Fatal(err)
		}
		text, isErr := h.call("echo", `{"message":"hi"}`)
		if !isErr || !strings.Contains(text, "upstream connection lost") {
			// The crash may be seen as the process exit before the answer.
			t.Fatalf("call %d: %v %q", i, isErr, text)
		}
	}
	if got := h.upstreamCalls()["echo"]; got != 3 {
		t.Fatalf("upstream received %d calls, want 3 (no replay)", got)
	}
	if got := h.ledger.Progress(h.plan.Digest).Calls(0); got != 3 {
		t.Fatalf("counted %d, want 3", got)
	}
}

func TestProgressIsRelayedUnderTheClientsToken(t *testing.T) {
	h := faultHarness(t, "normal", 30*time.Second)
	var mu sync.Mutex
	var got []mcp.JSONRPCNotification
	h.client.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/progress" {
			mu.Lock()
			got = append(got, n)
			mu.Unlock()
		}
	})
	req := mcp.CallToolRequest{}
	req.Params.Name = "progress"
	req.Params.Arguments = map[string]any{"steps": 3}
	req.Params.Meta = &mcp.Meta{ProgressToken: "client-token-7"}
	res, err := h.client.CallTool(h.ctx, req)
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("got %d progress notifications, want 3", len(got))
	}
	for _, n := range got {
		if tok := n.Params.AdditionalFields["progressToken"]; tok != "client-token-7" {
			t.Fatalf("progress token %v, want the client's", tok)
		}
	}
}

func TestServerInitiatedRequestsFailAtOnce(t *testing.T) {
	// With a one-hour call timeout, only an immediate failure ends these calls.
	h := faultHarness(t, "normal", time.Hour)
	for _, tc := range []struct{ tool, args string }{{"sample", `{"prompt":"hi"}`}, {"elicit", `{"message":"hi"}`}} {
		text, isErr := h.call(tc.tool, tc.args)
		if !isErr {
			t.Fatalf("%s: got a success %q, want the upstream's error", tc.tool, text)
		}
	}
}

func TestClientCancellationCancelsTheUpstreamCall(t *testing.T) {
	h := faultHarness(t, "normal", time.Hour)
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan error, 1)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name = "slow"
		req.Params.Arguments = map[string]any{"ms": 3600000}
		_, err := h.client.CallTool(ctx, req)
		done <- err
	}()
	// Cancel once the upstream has the call.
	for h.upstreamCalls()["slow"] == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled call succeeded")
	}
	// The outcome record says the client cancelled it: the proxy's upstream
	// call ended instead of waiting an hour.
	for {
		b, err := readFile(h.audit)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), `"cancelled by the client"`) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRestartedHTTPUpstreamGetsAFreshSession(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	callsLog := dir + "/calls.jsonl"
	start := func() *exec.Cmd {
		cmd := exec.Command(refundBin, "--http", "127.0.0.1:"+port, "--calls-log", callsLog)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stderr)
		for sc.Scan() && !strings.Contains(sc.Text(), "http://") {
		}
		go io.Copy(io.Discard, stderr)
		return cmd
	}
	up := start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plan, diags := hclplan.Parse("plan.hcl", []byte(anyOrder(refundPlan)))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	l, err := ledger.Open(ctx, ledger.Options{Dir: dir + "/state"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p, err := New(Config{Plan: plan, State: l, Upstream: UpstreamConfig{URL: "http://127.0.0.1:" + port + "/mcp"}, Log: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	go p.Run(ctx)
	if err := p.WaitUpstream(ctx); err != nil {
		t.Fatal(err)
	}
	call := func() *mcp.CallToolResult {
		req := mcp.CallToolRequest{}
		req.Params.Name = "get_order"
		req.Params.Arguments = json.RawMessage(`{"order_id":"4711"}`)
		req.Params.RawArguments = json.RawMessage(`{"order_id":"4711"}`)
		res, err := p.handleCall(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := call(); res.IsError {
		t.Fatalf("first call: %+v", res.Content)
	}
	// The upstream restarts: the proxy's session is gone.
	_ = up.Process.Kill()
	_ = up.Wait()
	up = start()
	defer func() { _ = up.Process.Kill(); _ = up.Wait() }()
	if res := call(); res.IsError {
		t.Fatalf("call after the upstream restarted: %+v", res.Content)
	}
	if n := strings.Count(readString(callsLog), `"get_order"`); n != 2 {
		t.Fatalf("upstream received %d calls, want 2", n)
	}
	if got := l.Progress(plan.Digest).Calls(0); got != 2 {
		t.Fatalf("counted %d, want 2", got)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

func readString(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// A legacy stdio server that exits on a request before initialize (as
// servers built on some SDKs do) dies on the server/discover probe: it is a
// legacy server, started again and spoken to with initialize at once.
func TestUpstreamThatExitsOnTheProbeIsLegacy(t *testing.T) {
	h := faultHarness(t, "exit-on-discover", 10*time.Second)
	if err := h.proxy.WaitUpstream(h.ctx); err != nil {
		t.Fatal(err)
	}
	text, isErr := h.call("echo", `{"message":"hi"}`)
	if isErr || text != "hi" {
		t.Fatalf("got %v %q, want the call through a legacy upstream", isErr, text)
	}
	if got := h.upstreamCalls()["echo"]; got != 1 {
		t.Fatalf("upstream received %d calls, want 1", got)
	}
}
