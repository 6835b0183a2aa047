package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/testkit/leakcheck"
	"github.com/planlock/planlock/internal/testkit/testbin"
	"github.com/planlock/planlock/internal/testkit/testplans"
	"github.com/planlock/planlock/proxy/ledger"
)

// refundBin is the example refund server (examples/refund/server), the
// upstream of these tests; testUpstreamBin plays faults
// (internal/testkit/testupstream). Both are this test binary itself, run under
// another name: the tests need no built command (the end-to-end tests that
// run the planlock CLI are in test/e2e).
var refundBin, testUpstreamBin string

func TestMain(m *testing.M) {
	testbin.Serve()
	bins, cleanup, err := testbin.Link(testbin.Refund, testbin.TestUpstream)
	if err != nil {
		panic(err)
	}
	refundBin, testUpstreamBin = bins[testbin.Refund], bins[testbin.TestUpstream]
	// No upstream a test started may outlive the tests (internal/testkit/leakcheck).
	if err := leakcheck.Start(); err != nil {
		panic(err)
	}
	code := m.Run()
	if err := leakcheck.Check(leakcheck.Grace); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	cleanup()
	os.Exit(code)
}

const goodHash = testplans.GoodHash

const refundPlan = testplans.Refund

type harness struct {
	t        *testing.T
	ctx      context.Context
	client   *client.Client
	proxy    *Proxy
	ledger   *ledger.Ledger
	plan     *hclplan.Plan
	dir      string
	callsLog string
	hashFile string
	audit    string
}

type harnessOpts struct {
	now         func() time.Time
	callTimeout time.Duration
	command     []string // replaces the refund server
	url         string   // a streamable HTTP upstream instead of a command
	observe     Observe
	observer    CallObserver
}

// newHarness runs the proxy in process in front of the refund server, with a
// real ledger, and connects an mcp-go client to it over stdio pipes.
func newHarness(t *testing.T, planSrc string, o harnessOpts) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	h := &harness{t: t, ctx: ctx, dir: dir, callsLog: filepath.Join(dir, "calls.jsonl"), hashFile: filepath.Join(dir, "hash"),
		audit: filepath.Join(dir, "state", "audit.jsonl")}
	if err := os.WriteFile(h.hashFile, []byte(goodHash+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	plan, diags := hclplan.Parse("plan.hcl", []byte(planSrc))
	if diags.HasErrors() {
		t.Fatalf("plan: %v", diags)
	}
	h.plan = plan
	l, err := ledger.Open(ctx, ledger.Options{Dir: filepath.Join(dir, "state")})
	if err != nil {
		t.Fatal(err)
	}
	h.ledger = l
	cmd := o.command
	if cmd == nil {
		cmd = []string{refundBin, "--calls-log", h.callsLog, "--hash-file", h.hashFile}
	}
	env, err := UpstreamEnv(nil, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{Plan: plan, State: l, Now: o.now, CallTimeout: o.callTimeout, Observe: o.observe, Observer: o.observer,
		Upstream: upstreamOf(o.url, cmd, env, testWriter{t}), Log: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	cr, pw := io.Pipe()
	pr, cw := io.Pipe()
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := p.ServeStdio(ctx, cr, cw); err != nil {
			t.Logf("serve: %v", err)
		}
	}()
	tr := transport.NewIO(pr, pw, io.NopCloser(strings.NewReader("")))
	c := client.NewClient(tr)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	h.client = c
	h.proxy = p
	t.Cleanup(func() {
		c.Close()
		// The client reads no more, as a client process that exits: a
		// write the proxy still makes (a notification) then fails instead
		// of waiting on the pipe for good.
		pr.Close()
		cancel()
		pw.Close()
		cr.Close()
		<-served
		l.Close()
	})
	return h
}

// upstreamOf is the harness's upstream: url when given, else cmd.
func upstreamOf(url string, cmd, env []string, stderr io.Writer) UpstreamConfig {
	if url != "" {
		return UpstreamConfig{URL: url}
	}
	return UpstreamConfig{Command: cmd, Env: env, Stderr: stderr}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// call makes one tools/call with raw JSON arguments and returns the text of
// the result and whether it is an error.
func (h *harness) call(tool, args string) (string, bool) {
	h.t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	if args != "" {
		req.Params.Arguments = json.RawMessage(args)
	}
	res, err := h.client.CallTool(h.ctx, req)
	if err != nil {
		h.t.Fatalf("call %s: %v", tool, err)
	}
	var texts []string
	for _, c := range res.Content {
		if t, ok := c.(mcp.TextContent); ok {
			texts = append(texts, t.Text)
		}
	}
	return strings.Join(texts, "\n"), res.IsError
}

// upstreamCalls counts the tools/call the upstream received, per tool.
func (h *harness) upstreamCalls() map[string]int {
	h.t.Helper()
	f, err := os.Open(h.callsLog)
	if os.IsNotExist(err) {
		return map[string]int{}
	}
	if err != nil {
		h.t.Fatal(err)
	}
	defer f.Close()
	n := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct {
			Tool string `json:"tool"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			h.t.Fatalf("calls log: %v", err)
		}
		n[r.Tool]++
	}
	return n
}

func (h *harness) verifyAudit() int {
	h.t.Helper()
	f, err := os.Open(h.audit)
	if err != nil {
		h.t.Fatal(err)
	}
	defer f.Close()
	res, err := ledger.Verify(f)
	if err != nil {
		h.t.Fatalf("audit verify: %v", err)
	}
	return res.Records
}

func TestToolsListShowsOnlyPlannedToolsWithExactSchemas(t *testing.T) {
	h := newHarness(t, refundPlan, harnessOpts{})
	// The upstream's own tools/list, read raw.
	direct := rawToolsList(t, []string{refundBin})

	// Read the proxy's answer raw too: a typed client would drop keywords.
	resp, err := h.client.GetTransport().SendRequest(h.ctx, transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(int64(99)), Method: "tools/list"})
	if err != nil || resp.Error != nil {
		t.Fatalf("tools/list: %v %v", err, resp.Error)
	}
	var res struct{ Tools []rawToolDef }
	if err := json.Unmarshal(resp.Result, &res); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tool := range res.Tools {
		got = append(got, tool.Name)
		want, ok := direct[tool.Name]
		if !ok {
			t.Fatalf("proxy shows %q, which the upstream does not have", tool.Name)
		}
		if string(tool.InputSchema) != string(want.InputSchema) {
			t.Errorf("%s inputSchema changed:\n got %s\nwant %s", tool.Name, tool.InputSchema, want.InputSchema)
		}
		if !strings.HasPrefix(tool.Description, want.Description+"\n\n[planlock] step ") {
			t.Errorf("%s description %q does not start with the upstream's %q and the limits", tool.Name, tool.Description, want.Description)
		}
	}
	want := []string{"close_ticket", "get_order", "refund_customer", "send_email"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("tools %v, want %v (get_script_by_path is not planned)", got, want)
	}
}

type rawToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// rawToolsList asks an upstream for its tools without the proxy.
func rawToolsList(t *testing.T, command []string) map[string]rawToolDef {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env, _ := UpstreamEnv(nil, os.LookupEnv)
	var got []json.RawMessage
	u := newUpstream(UpstreamConfig{Command: command, Env: env}, nil, func(ts []json.RawMessage) { got = ts })
	c, err := u.connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.tr.Close()
	out := map[string]rawToolDef{}
	for _, r := range got {
		var d rawToolDef
		if err := json.Unmarshal(r, &d); err != nil {
			t.Fatal(err)
		}
		out[d.Name] = d
	}
	return out
}

func TestGateThroughTheProxy(t *testing.T) {
	h := newHarness(t, refundPlan, harnessOpts{})
	type step struct {
		tool, args string
		wantErr    bool
		wantText   string // substring
	}
	steps := []step{
		{"refund_customer", `{"order_id":"4711","amount":10,"currency":"EUR"}`, true,
			`blocked by plan "refund-4711": step "refund" is not allowed yet: step "lookup" needs a successful call first`},
		{"get_script_by_path", `{"path":"f/support/refund_customer"}`, true,
			`blocked by plan "refund-4711": tool "get_script_by_path" is not in plan "refund-4711"`},
		{"get_order", `{"order_id":"4712"}`, true, `step "lookup": argument "order_id" = "4712", want "4711"`},
		{"get_order", `{"order_id":"4711","verbose":true}`, true, `step "lookup": argument "verbose" is not allowed by the plan`},
		{"get_order", `[1,2]`, true, `arguments must be a JSON object`},
		{"get_order", ``, true, `step "lookup": argument "order_id" is required`},
		{"get_order", `{"order_id":"4711"}`, false, `"order_id":"4711"`},
		{"refund_customer", `{"order_id":"4711","amount":30.5,"currency":"EUR"}`, true, `step "refund": argument "amount" = 30.5 is above the maximum 30`},
		{"refund_customer", `{"order_id":"4711","amount":30.0,"currency":"EUR"}`, false, `"status":"refunded"`},
		{"refund_customer", `{"order_id":"4711","amount":30.0,"currency":"EUR"}`, true, `step "refund": max_calls 1 used up (1 calls forwarded)`},
		{"get_order", `{"order_id":"4711"}`, true, `step "lookup" is closed: the plan has moved on to step "refund"`},
	}
	for i, s := range steps {
		text, isErr := h.call(s.tool, s.args)
		if isErr != s.wantErr || !strings.Contains(text, s.wantText) {
			t.Fatalf("call %d %s %s: got isError=%v %q\nwant isError=%v containing %q", i, s.tool, s.args, isErr, text, s.wantErr, s.wantText)
		}
		if s.wantErr && strings.Contains(text, "\n") {
			t.Errorf("call %d: the reason is not one line: %q", i, text)
		}
	}
	got := h.upstreamCalls()
	want := map[string]int{"get_order": 1, "refund_customer": 1, "get_script_by_path": 1}
	if len(got) != len(want) || got["get_order"] != 1 || got["refund_customer"] != 1 || got["get_script_by_path"] != 1 {
		t.Fatalf("upstream received %v, want %v (one pin read before the refund)", got, want)
	}
	if n := h.verifyAudit(); n < len(steps)+1 {
		t.Fatalf("audit has %d records, want at least %d", n, len(steps)+1)
	}
}

func TestExpiredPlanBlocksEverything(t *testing.T) {
	src := strings.Replace(refundPlan, `goal = `, `expires = "2026-01-01T00:00:00Z"
  goal = `, 1)
	h := newHarness(t, src, harnessOpts{now: func() time.Time { return time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC) }})
	text, isErr := h.call("get_order", `{"order_id":"4711"}`)
	if !isErr || text != `blocked by plan "refund-4711": plan "refund-4711" expired at 2026-01-01T00:00:00Z; no call is allowed` {
		t.Fatalf("got %v %q", isErr, text)
	}
	if n := len(h.upstreamCalls()); n != 0 {
		t.Fatalf("upstream received %d calls", n)
	}
}

func anyOrder(src string) string { return testplans.AnyOrder(src) }

func TestPinMismatchHoldsAndDoesNotForward(t *testing.T) {
	h := newHarness(t, anyOrder(refundPlan), harnessOpts{})
	if err := os.WriteFile(h.hashFile, []byte("0000000000000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := `{"order_id":"4711","amount":5,"currency":"EUR"}`
	text, isErr := h.call("refund_customer", args)
	if !isErr || !strings.HasPrefix(text, `held: step "refund": pin get_script_by_path.hash = "0000000000000000", want "9f86d081884c7d65"`) ||
		!strings.Contains(text, "repeat exactly the same call") {
		t.Fatalf("got %v %q", isErr, text)
	}
	// The identical call finds the same hold.
	text2, _ := h.call("refund_customer", args)
	if holdID(text) == "" || holdID(text) != holdID(text2) {
		t.Fatalf("repeated call got another hold: %q vs %q", text, text2)
	}
	// A failed pin read is a hold too.
	if err := os.Remove(h.hashFile); err != nil {
		t.Fatal(err)
	}
	text, isErr = h.call("refund_customer", `{"order_id":"4711","amount":6,"currency":"EUR"}`)
	if !isErr || !strings.HasPrefix(text, `held: step "refund": pin read get_script_by_path({"path":"f/support/refund_customer"}) failed: the tool answered an error`) {
		t.Fatalf("got %v %q", isErr, text)
	}
	if got := h.upstreamCalls(); got["refund_customer"] != 0 || got["get_script_by_path"] != 3 {
		t.Fatalf("upstream received %v, want 3 pin reads and no refund", got)
	}
}

func holdID(text string) string {
	_, rest, ok := strings.Cut(text, "(hold ")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, ",")
	return id
}

func TestApprovalEachHoldsUntilApprovedThenRunsOnce(t *testing.T) {
	h := newHarness(t, anyOrder(strings.Replace(refundPlan, `approval = "each"`, `approval = "each"
    max_calls = 3`, 1)), harnessOpts{})
	args := `{"to":"customer-4711@example.com","body":"Your refund is on its way."}`
	text, isErr := h.call("send_email", args)
	id := holdID(text)
	if !isErr || !strings.HasPrefix(text, `held: step "email" needs a human approval for each call; needs approval (hold `) || id == "" {
		t.Fatalf("got %v %q", isErr, text)
	}
	if _, err := h.ledger.UpdateHold(h.ctx, id, ledger.HoldUpdate{State: ledger.HoldApproved}); err != nil {
		t.Fatal(err)
	}
	// Another call is not covered by the approval.
	if text, _ := h.call("send_email", `{"to":"customer-4711@example.com","body":"other"}`); !strings.HasPrefix(text, "held: ") || holdID(text) == id {
		t.Fatalf("other call: %q", text)
	}
	if text, isErr := h.call("send_email", args); isErr || !strings.Contains(text, `"status":"sent"`) {
		t.Fatalf("approved call: %v %q", isErr, text)
	}
	// Consumed: the same call again needs a new approval.
	if text, _ := h.call("send_email", args); !strings.HasPrefix(text, "held: ") || holdID(text) == id {
		t.Fatalf("after consumption: %q", text)
	}
	if got := h.upstreamCalls()["send_email"]; got != 1 {
		t.Fatalf("upstream received %d emails, want 1", got)
	}
	// A rejected hold blocks and says not to retry.
	text, _ = h.call("send_email", `{"to":"customer-4711@example.com","body":"other"}`)
	if _, err := h.ledger.UpdateHold(h.ctx, holdID(text), ledger.HoldUpdate{State: ledger.HoldRejected}); err != nil {
		t.Fatal(err)
	}
	if text, _ := h.call("send_email", `{"to":"customer-4711@example.com","body":"other"}`); !strings.Contains(text, "was rejected; do not retry it") {
		t.Fatalf("rejected: %q", text)
	}
}

func TestOnViolationHold(t *testing.T) {
	src := strings.Replace(refundPlan, `goal = `, `on_violation = "hold"
  goal = `, 1)
	h := newHarness(t, src, harnessOpts{})
	text, isErr := h.call("get_order", `{"order_id":"9"}`)
	if !isErr || !strings.HasPrefix(text, `held: step "lookup": argument "order_id" = "9", want "4711"; needs approval`) {
		t.Fatalf("got %v %q", isErr, text)
	}
	if _, err := h.ledger.UpdateHold(h.ctx, holdID(text), ledger.HoldUpdate{State: ledger.HoldApproved}); err != nil {
		t.Fatal(err)
	}
	if text, isErr := h.call("get_order", `{"order_id":"9"}`); !isErr || !strings.Contains(text, `order \"9\" not found`) && !strings.Contains(text, `order "9" not found`) {
		t.Fatalf("approved call should reach the upstream: %v %q", isErr, text)
	}
	if got := h.upstreamCalls()["get_order"]; got != 1 {
		t.Fatalf("upstream received %d, want 1", got)
	}
}

func TestOnErrorHoldPutsTheStepOnHold(t *testing.T) {
	h := newHarness(t, `
plan "onerr" {
  goal  = "refund anything, hold after a failure"
  order = "any"
  step "refund" {
    tool      = "refund_customer"
    max_calls = 3
    on_error  = "hold"
    arg "order_id" { any = true }
    arg "amount" { any = true }
    arg "currency" { any = true }
  }
}`, harnessOpts{})
	text, isErr := h.call("refund_customer", `{"order_id":"9999","amount":5,"currency":"EUR"}`)
	if !isErr || !strings.Contains(text, `order "9999" not found`) {
		t.Fatalf("first call should fail upstream: %v %q", isErr, text)
	}
	text, isErr = h.call("refund_customer", `{"order_id":"4711","amount":5,"currency":"EUR"}`)
	if !isErr || !strings.HasPrefix(text, `held: step "refund" is on hold after a failed call (tool error: order "9999" not found)`) {
		t.Fatalf("second call should be held: %v %q", isErr, text)
	}
	if got := h.upstreamCalls()["refund_customer"]; got != 1 {
		t.Fatalf("upstream received %d, want 1 (the failed call counts, the held one is not forwarded)", got)
	}
	if p := h.ledger.Progress(h.plan.Digest); p.Calls(0) != 1 {
		t.Fatalf("counted %d calls, want 1", p.Calls(0))
	}
	// After a restart (a new proxy on the same state) the step is still on hold.
	p2, err := New(Config{Plan: h.plan, State: h.ledger, Upstream: UpstreamConfig{Command: []string{"/nonexistent"}}})
	if err != nil {
		t.Fatal(err)
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = "refund_customer"
	req.Params.RawArguments = json.RawMessage(`{"order_id":"4712","amount":5,"currency":"EUR"}`)
	res, err := p2.handleCall(h.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Content[0].(mcp.TextContent).Text; !res.IsError || !strings.HasPrefix(text, `held: step "refund" is on hold after a failed call (tool error: order "9999" not found)`) {
		t.Fatalf("after restart: %q", text)
	}
}

func TestParallelCallsAgainstMaxCallsOneForwardExactlyOne(t *testing.T) {
	h := newHarness(t, anyOrder(refundPlan), harnessOpts{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, blocked := 0, 0
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			text, isErr := h.call("close_ticket", `{"ticket_id":"T-4711","comment":"done"}`)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case !isErr:
				ok++
			case strings.Contains(text, `step "close": max_calls 1 used up`):
				blocked++
			default:
				t.Errorf("unexpected answer: %q", text)
			}
		}()
	}
	wg.Wait()
	if ok != 1 || blocked != 99 {
		t.Fatalf("%d allowed, %d blocked; want 1 and 99", ok, blocked)
	}
	if got := h.upstreamCalls()["close_ticket"]; got != 1 {
		t.Fatalf("upstream received %d calls, want exactly 1", got)
	}
	h.verifyAudit()
}

func readFile(path string) ([]byte, error) { return os.ReadFile(path) }

func TestToolUnknownToPlanAndUpstreamIsAnErrorAndAudited(t *testing.T) {
	h := newHarness(t, refundPlan, harnessOpts{})
	req := mcp.CallToolRequest{}
	req.Params.Name = "rm_rf"
	req.Params.Arguments = json.RawMessage(`{"path":"/"}`)
	if _, err := h.client.CallTool(h.ctx, req); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("got %v, want a tool-not-found error", err)
	}
	h.ledger.Close() // flush
	if b, _ := os.ReadFile(h.audit); !strings.Contains(string(b), `tool \"rm_rf\" is not in plan \"refund-4711\" (and the upstream does not offer it)`) {
		t.Fatalf("audit lacks the attempt:\n%s", b)
	}
}

func TestMalformedJSONRPCGetsAnErrorAndTheProxyKeepsRunning(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plan, _ := hclplan.Parse("plan.hcl", []byte(refundPlan))
	l, err := ledger.Open(ctx, ledger.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	env, _ := UpstreamEnv(nil, os.LookupEnv)
	p, err := New(Config{Plan: plan, State: l, Upstream: UpstreamConfig{Command: []string{refundBin}, Env: env}})
	if err != nil {
		t.Fatal(err)
	}
	in := strings.Join([]string{
		`this is not JSON`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"not an object"}`,
		`{"jsonrpc":"2.0","id":2,"method":"no/such/method"}`,
		`{"jsonrpc":"2.0","id":3,"method":"prompts/list"}`,
		`{"jsonrpc":"2.0","id":4,"method":"ping"}`,
	}, "\n") + "\n"
	pr, pw := io.Pipe()
	go func() {
		_, _ = io.WriteString(pw, in)
	}()
	out, ow := io.Pipe()
	go func() { _ = p.ServeStdio(ctx, pr, ow) }()
	got := map[string]string{}
	sc := bufio.NewScanner(out)
	for len(got) < 5 && sc.Scan() {
		var r struct {
			ID    json.RawMessage `json:"id"`
			Error *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("proxy wrote non-JSON: %q", sc.Text())
		}
		code := "ok"
		if r.Error != nil {
			code = strconv.Itoa(r.Error.Code)
		}
		got[string(r.ID)] = code
	}
	want := map[string]string{"null": "-32700", "1": "-32600", "2": "-32601", "3": "-32601", "4": "ok"}
	for id, code := range want {
		if got[id] != code {
			t.Errorf("id %s: got %q, want %q (all: %v)", id, got[id], code, got)
		}
	}
	pw.Close()
}
