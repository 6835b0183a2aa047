package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/wire"
	"github.com/planlock/planlock/proxy/gate"
	"github.com/planlock/planlock/proxy/ledger"
)

// fastPlan exercises each way a call can go on the test upstream.
var fastPlan = lanePlan(4, progressStep)

// progressStep allows the test upstream's progress tool.
const progressStep = `
  step "progress" {
    tool      = "progress"
    max_calls = 6
    arg "steps" { max = 3 }
  }`

// modernMembers is the _meta members of a tools/call of protocol 2026-07-28
// with no optional client capability.
const modernMembers = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`

// lanePlan is the fast lanes' test plan: echo allowed echoCalls times, and
// more steps after the four every lane test uses.
func lanePlan(echoCalls int, more string) string {
	return fmt.Sprintf(`
plan "fast" {
  goal  = "every kind of call"
  order = "any"
  step "echo" {
    tool      = "echo"
    max_calls = %d
    arg "message" { max_length = 10 }
  }
  step "slow" {
    tool      = "slow"
    max_calls = 10
    arg "ms" { max = 10000 }
  }
  step "big" {
    tool      = "big"
    max_calls = 2
    approval  = "each"
    arg "bytes" { max = 100 }
  }
  step "sample" {
    tool      = "sample"
    max_calls = 2
    on_error  = "hold"
    arg "prompt" { max_length = 10 }
  }%s
}`, echoCalls, more)
}

// lane is one scripted stdio session against the proxy: line in, answers out.
type lane struct {
	t     *testing.T
	in    *io.PipeWriter
	out   chan string // every line the proxy writes, read as it comes
	audit string
	p     *Proxy
}

func newLane(t *testing.T, fast bool) *lane {
	t.Helper()
	return newLaneWith(t, fastPlan, fast, nil)
}

// newLaneWith is newLane with a plan of its own and, when wrap is set, the
// ledger seen through wrap.
func newLaneWith(t *testing.T, planText string, fast bool, wrap func(*ledger.Ledger) State) *lane {
	t.Helper()
	return newLaneUpstream(t, planText, fast, wrap)
}

// newLaneUpstream is newLaneWith with the test upstream started with
// upstreamArgs.
func newLaneUpstream(t *testing.T, planText string, fast bool, wrap func(*ledger.Ledger) State, upstreamArgs ...string) *lane {
	t.Helper()
	return newLaneEdit(t, planText, fast, wrap, nil, upstreamArgs...)
}

// newLaneEdit is newLaneUpstream with the proxy's configuration changed by
// edit (when set) before it is built.
func newLaneEdit(t *testing.T, planText string, fast bool, wrap func(*ledger.Ledger) State, edit func(*Config), upstreamArgs ...string) *lane {
	t.Helper()
	p, l, audit := laneProxyEdit(t, planText, fast, wrap, edit, upstreamArgs...)
	ctx, cancel := context.WithCancel(context.Background())
	cr, pw := io.Pipe()
	pr, cw := io.Pipe()
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = p.ServeStdio(ctx, cr, cw)
	}()
	t.Cleanup(func() {
		pr.Close() // the test reads no more (see newHarness)
		pw.Close()
		cancel()
		<-served
		l.Close()
	})
	ln := &lane{t: t, in: pw, out: make(chan string, 100), audit: audit, p: p}
	go func() {
		defer close(ln.out)
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			ln.out <- sc.Text()
		}
	}()
	ln.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	ln.answer()
	ln.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if err := p.WaitUpstream(ctx); err != nil {
		t.Fatal(err)
	}
	return ln
}

// allows counts the allow records in the audit log (in observe mode,
// the records of calls forwarded observed).
func (l *lane) allows() int {
	b, _ := os.ReadFile(l.audit)
	return strings.Count(string(b), `"decision":"allow"`) + strings.Count(string(b), `"type":"observe"`)
}

func (l *lane) waitAllows(n int) {
	l.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for l.allows() < n {
		if time.Now().After(deadline) {
			l.t.Fatalf("the call was not allowed within 20s")
		}
		time.Sleep(time.Millisecond)
	}
}

func fixedNow() time.Time { return time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) }

func (l *lane) send(line string) {
	l.t.Helper()
	if _, err := io.WriteString(l.in, line+"\n"); err != nil {
		l.t.Fatal(err)
	}
}

// answer reads the next answer, skipping notifications.
func (l *lane) answer() string {
	l.t.Helper()
	for {
		select {
		case line, ok := <-l.out:
			if !ok {
				l.t.Fatal("the proxy closed its output")
			}
			if !strings.Contains(line, `"method":"notifications/`) {
				return line
			}
		case <-time.After(20 * time.Second):
			l.t.Fatal("no answer within 20s")
		}
	}
}

var holdIDs = regexp.MustCompile(`\b[0-9a-f]{16}\b`)

// canonical is a JSON text with keys sorted, hold ids and (in audit
// records) the fields of time and hash chain left out.
func canonical(t *testing.T, line string, drop ...string) string {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(line), &v); err != nil {
		t.Fatalf("not JSON: %q", line)
	}
	for _, k := range drop {
		delete(v, k)
	}
	b, _ := json.Marshal(v)
	return holdIDs.ReplaceAllString(string(b), "HOLD")
}

// fastScript is what a client may send: each entry is written, then its
// answers are read (after the extra lines, sent without waiting).
// afterAllow names the steps whose lines after the first are sent once the
// first has been allowed (its allow record is in the audit log), so that a
// cancellation finds the call in flight in either lane.
var afterAllow = map[string]bool{"cancelled by the client": true, "modern cancelled by the client": true}

var fastScript = []struct {
	name  string
	lines []string
}{
	{"allowed", []string{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`}},
	{"string id", []string{`{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"name":"echo","arguments":{"message":"there"}}}`}},
	{"argument over its bound", []string{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"far too long a message"}}}`}},
	{"arguments not an object", []string{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":[1]}}`}},
	{"no arguments", []string{`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo"}}`}},
	{"unknown tool", []string{`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"nope","arguments":{}}}`}},
	{"tool outside the plan", []string{`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"flood","arguments":{}}}`}},
	{"with _meta", []string{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"meta"},"_meta":{"x":1}}}`}},
	{"max_calls spent", []string{`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"message":"5th"}}}`}},
	{"approval each holds", []string{`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"big","arguments":{"bytes":10}}}`}},
	{"tool error", []string{`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"sample","arguments":{"prompt":"p"}}}`}},
	{"object id", []string{`{"jsonrpc":"2.0","id":{"x":1},"method":"tools/call","params":{"name":"echo","arguments":{"message":"o"}}}`}},
	{"name not a string", []string{`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":7}}`}},
	{"cancelled by the client", []string{`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"slow","arguments":{"ms":5000}}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":12,"reason":"user"}}`}},
	{"timeout", []string{`{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"slow","arguments":{"ms":5000}}}`}},
	{"step on hold after the error", []string{`{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"sample","arguments":{"prompt":"q"}}}`}},
	{"after the timeout", []string{`{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{"name":"slow","arguments":{"ms":1}}}`}},
	{"number beyond float64", []string{`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"echo","arguments":{"message":"x","n":1e400}}}`}},
	{"id the server rewrites", []string{`{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"echo","arguments":{"message":"id"}}}`}},
	{"negative zero id", []string{`{"jsonrpc":"2.0","id":-0,"method":"tools/call","params":{"name":"echo","arguments":{"message":"id"}}}`}},
	{"long integer id", []string{`{"jsonrpc":"2.0","id":12345678901234567890,"method":"tools/call","params":{"name":"echo","arguments":{"message":"id"}}}`}},
	{"escaped string id", []string{`{"jsonrpc":"2.0","id":"\u0041","method":"tools/call","params":{"name":"echo","arguments":{"message":"id"}}}`}},
	{"wrong jsonrpc version", []string{`{"jsonrpc":"1.0","id":15,"method":"tools/call","params":{"name":"echo","arguments":{"message":"v"}}}`}},
	// Both protocol eras: _meta with a progress token, and the requests of
	// 2026-07-28, which carry their era in _meta.
	{"progress token", []string{`{"jsonrpc":"2.0","id":18,"method":"tools/call","params":{"name":"progress","arguments":{"steps":2},"_meta":{"progressToken":"p-1"}}}`}},
	{"modern", []string{`{"jsonrpc":"2.0","id":19,"method":"tools/call","params":{"name":"slow","arguments":{"ms":1},"_meta":{` + modernMembers + `}}}`}},
	{"modern with client info and capabilities", []string{`{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"slow","arguments":{"ms":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"m","version":"2"},"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}`}},
	{"modern with a progress token", []string{`{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"progress","arguments":{"steps":3},"_meta":{"progressToken":7,` + modernMembers + `}}}`}},
	{"modern argument over its bound", []string{`{"jsonrpc":"2.0","id":22,"method":"tools/call","params":{"name":"slow","arguments":{"ms":99999},"_meta":{` + modernMembers + `}}}`}},
	{"modern tool outside the plan", []string{`{"jsonrpc":"2.0","id":23,"method":"tools/call","params":{"name":"flood","arguments":{},"_meta":{` + modernMembers + `}}}`}},
	{"modern unknown tool", []string{`{"jsonrpc":"2.0","id":24,"method":"tools/call","params":{"name":"nope","arguments":{},"_meta":{` + modernMembers + `}}}`}},
	{"modern approval each holds", []string{`{"jsonrpc":"2.0","id":25,"method":"tools/call","params":{"name":"big","arguments":{"bytes":20},"_meta":{` + modernMembers + `}}}`}},
	{"modern arguments not an object", []string{`{"jsonrpc":"2.0","id":26,"method":"tools/call","params":{"name":"slow","arguments":[1],"_meta":{` + modernMembers + `}}}`}},
	{"modern without client capabilities", []string{`{"jsonrpc":"2.0","id":27,"method":"tools/call","params":{"name":"slow","arguments":{"ms":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`}},
	{"modern of an unknown version", []string{`{"jsonrpc":"2.0","id":28,"method":"tools/call","params":{"name":"slow","arguments":{"ms":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`}},
	{"modern retry", []string{`{"jsonrpc":"2.0","id":29,"method":"tools/call","params":{"name":"slow","arguments":{"ms":1},"requestState":"s","_meta":{` + modernMembers + `}}}`}},
	{"_meta not an object", []string{`{"jsonrpc":"2.0","id":30,"method":"tools/call","params":{"name":"slow","arguments":{"ms":1},"_meta":[1]}}`}},
	{"_meta null", []string{`{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"name":"slow","arguments":{"ms":1},"_meta":null}}`}},
}

// laneModernCalls is a modern call on each way through a lane: allowed,
// with a progress token, blocked.
var laneModernCalls = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"},"_meta":{` + modernMembers + `}}}`,
	`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"progress","arguments":{"steps":2},"_meta":{"progressToken":"t",` + modernMembers + `}}}`,
	`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"far too long a message"},"_meta":{` + modernMembers + `}}}`,
}

// TestFastLaneTakesModernCalls: the stdio lane takes the calls of protocol
// 2026-07-28, and answers them as that era's: resultType and the server's
// identity in every result.
func TestFastLaneTakesModernCalls(t *testing.T) {
	ln := newLane(t, true)
	for i, line := range laneModernCalls {
		before := ln.p.fastTaken.Load()
		ln.send(line)
		a := ln.answer()
		if !strings.Contains(a, `"resultType":"complete"`) || !strings.Contains(a, `"io.modelcontextprotocol/serverInfo":{"name":"planlock"`) {
			t.Errorf("call %d: not a modern answer: %s", i+1, a)
		}
		if n := ln.p.fastTaken.Load() - before; n != 1 {
			t.Errorf("call %d: the fast lane took %d calls, want 1", i+1, n)
		}
	}
}

// TestFastLaneAnswersAsTheServer runs one script against the proxy with
// and without the stdio fast lane: the answers, the audit records and what
// reached the upstream must be the same, and the fast lane must have taken
// the plain calls.
func TestFastLaneAnswersAsTheServer(t *testing.T) {
	sameAnswers(t, newLane(t, false), newLane(t, true))
}

// remoteState is the ledger as a state the lane cannot wait on from the
// reader (one that may wait on the network, as PostgreSQL's).
type remoteState struct{ *ledger.Ledger }

// TestFastLaneTakesEveryConfiguration: the stdio lane takes the calls of
// every configuration, running them whole on a worker where the reader
// cannot wait (a state that may wait on the network, an HTTP upstream,
// observe mode), and answers and audits each as the MCP server does.
func TestFastLaneTakesEveryConfiguration(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(*ledger.Ledger) State
		edit func(t *testing.T) func(*Config)
	}{
		{name: "remote state", wrap: func(l *ledger.Ledger) State { return remoteState{l} }},
		{name: "http upstream", edit: func(t *testing.T) func(*Config) {
			url := httpTestUpstream(t)
			return func(c *Config) { c.Upstream.Command, c.Upstream.URL = nil, url }
		}},
		{name: "observe", edit: func(*testing.T) func(*Config) {
			return func(c *Config) { c.Observe = Observe{All: true} }
		}},
		{name: "observe a step", edit: func(*testing.T) func(*Config) {
			return func(c *Config) { c.Observe = Observe{Steps: []string{"echo"}} }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lanes := [2]*lane{}
			for i, fast := range []bool{false, true} {
				var edit func(*Config)
				if tc.edit != nil {
					edit = tc.edit(t)
				}
				lanes[i] = newLaneEdit(t, fastPlan, fast, tc.wrap, edit)
			}
			if lanes[1].p.fastLaneFor(context.Background(), nil, nil).direct {
				t.Fatal("the lane would decide on the reader")
			}
			sameAnswers(t, lanes[0], lanes[1])
		})
	}
}

// httpTestUpstream starts the test upstream over streamable HTTP and
// returns its URL.
func httpTestUpstream(t *testing.T) string {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(testUpstreamBin, "--http", "127.0.0.1:"+port)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && !strings.Contains(sc.Text(), "http://") {
	}
	go io.Copy(io.Discard, stderr)
	return "http://127.0.0.1:" + port + "/mcp"
}

// sameAnswers runs fastScript through the MCP server (slow) and the fast
// lane (fast): the answers and the audit records must be the same, and the
// lane must take every plain call.
func sameAnswers(t *testing.T, slow, fast *lane) {
	t.Helper()
	for _, step := range fastScript {
		var got [2]string
		for i, l := range []*lane{slow, fast} {
			allows := l.allows()
			for i, line := range step.lines {
				if i == 1 && afterAllow[step.name] {
					l.waitAllows(allows + 1)
				}
				l.send(line)
			}
			a := l.answer()
			// The id as written, which canonical's decode would hide.
			var env struct{ ID json.RawMessage }
			_ = json.Unmarshal([]byte(a), &env)
			got[i] = string(env.ID) + " " + canonical(t, a)
		}
		if got[0] != got[1] {
			t.Errorf("%s: answers differ\nserver:    %s\nfast lane: %s", step.name, got[0], got[1])
		}
	}
	if n := fast.p.fastTaken.Load(); n < 16 {
		t.Errorf("the fast lane took %d calls, want the 16 plain ones of both eras at least", n)
	}
	if n := slow.p.fastTaken.Load(); n != 0 {
		t.Errorf("the fast lane took %d calls while off", n)
	}
	recs := func(l *lane) []string {
		b, err := os.ReadFile(l.audit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			out = append(out, canonical(t, line, "time", "latency_ms", "hash", "prev", "expires", "state_sha256", "state", "ref"))
		}
		return out
	}
	// The lane writes a success's outcome record after its answer.
	a, b := recs(slow), recs(fast)
	for deadline := time.Now().Add(20 * time.Second); len(b) < len(a) && time.Now().Before(deadline); b = recs(fast) {
		time.Sleep(time.Millisecond)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("audit records differ:\nserver:\n%s\nfast lane:\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	if len(a) < 15 {
		t.Errorf("only %d audit records: the script did not run", len(a))
	}
}

// TestFastLaneSharesTheDisk: with one fdatasync per call, concurrent calls
// over one stdio session share fdatasyncs (group commit) instead of taking
// turns at the disk on the reader's goroutine, and each is still counted.
func TestFastLaneSharesTheDisk(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, l := newInProcessProxy(t, benchPlan, nil, ledger.Options{SyncEachCall: true})
	cr, pw := io.Pipe()
	pr, cw := io.Pipe()
	go func() { _ = p.ServeStdio(ctx, cr, cw) }()
	c := client.NewClient(transport.NewIO(pr, pw, io.NopCloser(strings.NewReader(""))))
	startClient(t, ctx, c)
	defer pw.Close()
	defer pr.Close() // the test reads no more (see newHarness)
	const callers, each = 16, 8
	before := l.Stats()
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range each {
				req := mcp.CallToolRequest{}
				req.Params.Name = "echo"
				req.Params.Arguments = map[string]any{"message": "hi"}
				if res, err := c.CallTool(ctx, req); err != nil || res.IsError {
					t.Errorf("echo: %v %+v", err, res)
				}
			}
		})
	}
	wg.Wait()
	after := l.Stats()
	if n := p.fastTaken.Load(); n < callers*each {
		t.Fatalf("the fast lane took %d of %d calls", n, callers*each)
	}
	if got := l.Progress(p.cur.Load().plan.Digest).Calls(0); got != callers*each {
		t.Fatalf("%d calls counted, want %d", got, callers*each)
	}
	// How many fdatasyncs the callers shared depends on how the machine
	// interleaved them; TestFastLaneHandsDiskWaitsToWorkers checks the rule.
	t.Logf("%d fdatasyncs for %d calls", after.Syncs-before.Syncs, callers*each)
}

// TestFastLaneHandsDiskWaitsToWorkers: a forward that will wait for an
// fdatasync goes to a worker while other calls are in flight (so that
// they can share it), and stays on the reader when it is the only one.
func TestFastLaneHandsDiskWaitsToWorkers(t *testing.T) {
	plan, diags := hclplan.Parse("plan.hcl", []byte(benchPlan))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	for _, tt := range []struct {
		name     string
		o        ledger.Options
		inFlight bool
		want     bool
	}{
		{"sync each call, others in flight", ledger.Options{SyncEachCall: true}, true, true},
		{"sync each call, alone", ledger.Options{SyncEachCall: true}, false, false},
		{"first call of a lease, others in flight", ledger.Options{}, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := newInProcessProxy(t, benchPlan, nil, tt.o)
			f := p.fastLaneFor(context.Background(), nil, nil)
			if f == nil {
				t.Fatal("no fast lane over a ledger and a stdio upstream")
			}
			if tt.inFlight {
				f.calls[`"other"`] = func(string) {}
			}
			tc := &toolCall{call: ledger.Call{PlanDigest: plan.Digest, Tool: "echo", Args: []byte(`{"message":"x"}`)}}
			d := gate.Decision{Kind: gate.KindForward, Forward: gate.Forward{Step: plan.Steps[0]}}
			if got := f.sharesDisk(tc, d); got != tt.want {
				t.Fatalf("sharesDisk = %v, want %v", got, tt.want)
			}
		})
	}
}

// panicky is an observer whose end of a call panics.
type panicky struct{}

func (panicky) StartCall(ctx context.Context, _ CallStart) (context.Context, func(CallEnd)) {
	return ctx, func(CallEnd) { panic("observer broke") }
}

// TestFastLaneContainsPanics: a panic while a call is answered (here in the
// observer, on the upstream reader's goroutine for a forwarded call) costs
// no answer and does not end the proxy.
func TestFastLaneContainsPanics(t *testing.T) {
	h := newHarness(t, refundPlan, harnessOpts{observer: panicky{}})
	for range 2 {
		if text, isErr := h.call("get_order", `{"order_id":"4711"}`); isErr || !strings.Contains(text, "4711") {
			t.Fatalf("get_order: %q (error %v)", text, isErr)
		}
	}
	if n := h.proxy.fastTaken.Load(); n != 2 {
		t.Fatalf("the fast lane took %d calls, want 2", n)
	}
}

// slowOutcomes is a ledger whose outcome records written after an answer
// wait for release.
type slowOutcomes struct {
	*ledger.Ledger
	release chan struct{}
}

func (slowOutcomes) localState() {}

func (s slowOutcomes) CompleteLater(ctx context.Context, t ledger.Ticket, o ledger.Outcome) (func(), error) {
	write, err := s.Ledger.CompleteLater(ctx, t, o)
	return func() { <-s.release; write() }, err
}

// slowCompletes is a ledger whose outcomes wait for release before they
// count.
type slowCompletes struct {
	*ledger.Ledger
	release chan struct{}
}

func (slowCompletes) localState() {}

func (s slowCompletes) Complete(ctx context.Context, t ledger.Ticket, o ledger.Outcome) error {
	<-s.release
	return s.Ledger.Complete(ctx, t, o)
}

// heldOutcomes is a fast lane whose outcomes count only once release is
// called (at the latest when the test ends).
func heldOutcomes(t *testing.T, plan string) (ln *lane, release func()) {
	ch := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	ln = newLaneWith(t, plan, true, func(l *ledger.Ledger) State { return slowCompletes{l, ch} })
	t.Cleanup(release) // registered after the lane's: it runs before the lane's waits for the session's end
	return ln, release
}

// TestFastLaneAnswersBeforeTheOutcomeRecord: a success is answered before
// its outcome counts and is recorded (the work between the upstream's
// answer and the client's is on the path of every call), yet the client's
// next call waits for that outcome: it is decided on the step the first
// call completed, and its allow record follows the outcome in the journal.
func TestFastLaneAnswersBeforeTheOutcomeRecord(t *testing.T) {
	const plan = `
plan "two" {
  goal = "one step after the other"
  step "first" {
    tool      = "echo"
    max_calls = 1
    arg "message" { eq = "one" }
  }
  step "second" {
    tool      = "echo"
    max_calls = 1
    arg "message" { eq = "two" }
  }
}`
	ln, release := heldOutcomes(t, plan)
	outcomes := func() []map[string]any {
		var out []map[string]any
		b, _ := os.ReadFile(ln.audit)
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var r map[string]any
			if json.Unmarshal([]byte(line), &r) == nil && r["type"] == "outcome" {
				out = append(out, r)
			}
		}
		return out
	}
	ln.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"one"}}}`)
	if a := ln.answer(); !strings.Contains(a, `"id":1`) || strings.Contains(a, `"isError":true`) {
		t.Fatalf("first call: %s", a)
	}
	if got := outcomes(); len(got) != 0 {
		t.Fatalf("the outcome was written before the answer: %v", got)
	}
	// The upstream reader waits to count the first call's outcome: the
	// second call is not decided meanwhile (decided now, it would be
	// blocked, its step not yet open).
	journal := func() []string {
		var order []string
		for _, r := range readAudit(t, ln.audit) {
			if d, ok := r["decision"]; ok && d != "allow" {
				order = append(order, fmt.Sprint(r["type"], "/", d, "/", r["step"]))
				continue
			}
			order = append(order, fmt.Sprint(r["type"], "/", r["step"]))
		}
		return order
	}
	before := journal()
	ln.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"two"}}}`)
	time.Sleep(100 * time.Millisecond)
	if order := journal(); len(order) != len(before) {
		t.Fatalf("the second call was decided before the first call's outcome counted: journal ends with %v", order[len(before):])
	}
	release()
	if a := ln.answer(); !strings.Contains(a, `"id":2`) || strings.Contains(a, `"isError":true`) {
		t.Fatalf("second call: %s", a)
	}
	ln.waitAllows(2)
	want := []string{"decision/first", "outcome/first", "decision/second"}
	if order := journal(); !reflect.DeepEqual(order[len(order)-len(want):], want) && !reflect.DeepEqual(order[len(order)-len(want)-1:len(order)-1], want) {
		t.Fatalf("journal ends with %v, want %v (and the second outcome)", order, want)
	}
	if p := ln.p.fastTaken.Load(); p != 2 {
		t.Fatalf("the fast lane took %d calls, want 2", p)
	}
}

// TestFastLaneFreesTheIDWithTheAnswer: once a call is answered its id is no
// longer in flight, even while its outcome is still to count: the client
// may use it again, and the lane takes that call (a call it counted as in
// flight would go to the MCP server; with one fdatasync per call, a call
// decided beside one in flight is sent to a worker to share the disk).
func TestFastLaneFreesTheIDWithTheAnswer(t *testing.T) {
	const plan = `
plan "again" {
  goal = "the same id twice"
  order = "any"
  step "echo" {
    tool      = "echo"
    max_calls = 5
    arg "message" { max_length = 10 }
  }
}`
	ln, release := heldOutcomes(t, plan)
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"x"}}}`
	ln.send(call)
	if a := ln.answer(); !strings.Contains(a, `"id":7`) || strings.Contains(a, `"isError":true`) {
		t.Fatalf("first call: %s", a)
	}
	ln.send(call) // its outcome has not counted yet
	time.Sleep(50 * time.Millisecond)
	release()
	if a := ln.answer(); !strings.Contains(a, `"id":7`) || strings.Contains(a, `"isError":true`) {
		t.Fatalf("second call: %s", a)
	}
	if n := ln.p.fastTaken.Load(); n != 2 {
		t.Fatalf("the fast lane took %d calls, want 2: the answered call's id was still in flight", n)
	}
	ln.waitAllows(2)
}

// readAudit reads the audit log's records.
func readAudit(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// laneProxy is the proxy both fast lanes' tests run, with or without its
// lane (fast): plan planText, a ledger of its own (seen through wrap when
// set) and the test upstream started with upstreamArgs. The caller closes
// the ledger once the proxy stopped; audit is its journal.
func laneProxy(t *testing.T, planText string, fast bool, wrap func(*ledger.Ledger) State, upstreamArgs ...string) (p *Proxy, l *ledger.Ledger, audit string) {
	t.Helper()
	return laneProxyEdit(t, planText, fast, wrap, nil, upstreamArgs...)
}

// laneProxyEdit is laneProxy with the configuration changed by edit (when
// set) before the proxy is built.
func laneProxyEdit(t *testing.T, planText string, fast bool, wrap func(*ledger.Ledger) State, edit func(*Config), upstreamArgs ...string) (p *Proxy, l *ledger.Ledger, audit string) {
	t.Helper()
	plan, diags := hclplan.Parse("plan.hcl", []byte(planText))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	dir := filepath.Join(t.TempDir(), "state")
	l, err := ledger.Open(context.Background(), ledger.Options{Dir: dir, Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	env, _ := UpstreamEnv(nil, func(string) (string, bool) { return "", false })
	var state State = l
	if wrap != nil {
		state = wrap(l)
	}
	cfg := Config{Plan: plan, State: state, Now: fixedNow, CallTimeout: 2 * time.Second,
		Upstream: UpstreamConfig{Command: append([]string{testUpstreamBin}, upstreamArgs...), Env: env, Stderr: testWriter{t}}, Log: testWriter{t}}
	if edit != nil {
		edit(&cfg)
	}
	p, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.noFastLane = !fast
	return p, l, filepath.Join(dir, "audit.jsonl")
}

// TestLanesTakeTheDefaultClientsCalls: mcp-go's default client (protocol
// 2026-07-28: server/discover, _meta on every request, the standard headers
// and no session over HTTP) has its calls taken by the fast lane over
// stdio and over HTTP, with and without a progress token, and reads each
// answer as a complete result.
func TestLanesTakeTheDefaultClientsCalls(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, tr := range []string{"stdio", "http"} {
		t.Run(tr, func(t *testing.T) {
			var c *client.Client
			var p *Proxy
			if tr == "stdio" {
				var l *ledger.Ledger
				p, l, _ = laneProxy(t, fastPlan, true, nil)
				cr, pw := io.Pipe()
				pr, cw := io.Pipe()
				sctx, stop := context.WithCancel(ctx)
				served := make(chan struct{})
				go func() {
					defer close(served)
					_ = p.ServeStdio(sctx, cr, cw)
				}()
				t.Cleanup(func() {
					pr.Close()
					pw.Close()
					stop()
					<-served
					l.Close()
				})
				c = client.NewClient(transport.NewIO(pr, pw, io.NopCloser(strings.NewReader(""))))
			} else {
				s := newHTTPSide(t, true)
				p = s.p
				ht, err := transport.NewStreamableHTTP(s.url)
				if err != nil {
					t.Fatal(err)
				}
				c = client.NewClient(ht)
			}
			defer c.Close()
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			res, err := c.Initialize(ctx, mcp.InitializeRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if !mcp.IsModernProtocol(res.ProtocolVersion) {
				t.Fatalf("the default client negotiated %s", res.ProtocolVersion)
			}
			if err := p.WaitUpstream(ctx); err != nil {
				t.Fatal(err)
			}
			progress := make(chan mcp.JSONRPCNotification, 10)
			c.OnNotification(func(n mcp.JSONRPCNotification) {
				if n.Method == string(mcp.MethodNotificationProgress) {
					progress <- n
				}
			})
			for _, tt := range []struct {
				tool  string
				args  map[string]any
				token mcp.ProgressToken
				want  string
			}{
				{"echo", map[string]any{"message": "hi"}, nil, "hi"},
				{"progress", map[string]any{"steps": 2}, "tok", "2"},
			} {
				before := p.fastTaken.Load()
				req := mcp.CallToolRequest{}
				req.Params.Name, req.Params.Arguments = tt.tool, tt.args
				if tt.token != nil {
					req.Params.Meta = &mcp.Meta{ProgressToken: tt.token}
				}
				r, err := c.CallTool(ctx, req)
				if err != nil || r.IsError || len(r.Content) != 1 {
					t.Fatalf("%s: %v %+v", tt.tool, err, r)
				}
				if text, _ := wire.ContentText(r.Content[0]); !strings.Contains(text, tt.want) || r.ResultType != mcp.ResultTypeComplete {
					t.Errorf("%s: %q (resultType %q)", tt.tool, text, r.ResultType)
				}
				if n := p.fastTaken.Load() - before; n != 1 {
					t.Errorf("%s: the fast lane took %d calls, want 1", tt.tool, n)
				}
			}
			// The progress came before the answer, under the client's token.
			select {
			case n := <-progress:
				if tok := n.Params.AdditionalFields["progressToken"]; tok != "tok" {
					t.Errorf("progress under token %v", tok)
				}
			default:
				t.Error("no progress notification before the answer")
			}
		})
	}
}

// TestModernHeadersAsTheServerChecksThem: the HTTP lane takes a modern
// call only when mcp-go's server would take its headers: the version in
// the header and _meta alike, Mcp-Method and Mcp-Name matching the body,
// and an Mcp-Param-* header for each argument the tool's schema binds
// (x-mcp-header), with the argument's value.
func TestModernHeadersAsTheServerChecksThem(t *testing.T) {
	p, l, _ := laneProxy(t, fastPlan, true, nil)
	defer l.Close()
	p.srv.AddTool(mcp.Tool{Name: "bound", RawInputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)}, nil)
	p.srv.AddTool(mcp.Tool{Name: "escaped", RawInputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-head\u0065r":"Region"}}}`)}, nil)
	p.srv.AddTool(mcp.Tool{Name: "plain", RawInputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string"}}}`)}, nil)
	era, ok := readLaneEra(json.RawMessage(`{` + modernMembers + `}`))
	if !ok || !era.modern() {
		t.Fatal("a modern _meta not read as modern")
	}
	for _, tt := range []struct {
		name, tool, args string
		headers          map[string]string
		want             bool
	}{
		{"plain tool", "plain", `{"region":"eu"}`, nil, true},
		{"bound argument with its header", "bound", `{"region":"eu"}`, map[string]string{"Mcp-Param-Region": "eu"}, true},
		{"bound argument without its header", "bound", `{"region":"eu"}`, nil, false},
		{"bound argument, another value", "bound", `{"region":"eu"}`, map[string]string{"Mcp-Param-Region": "us"}, false},
		{"escaped binding without its header", "escaped", `{"region":"eu"}`, nil, false},
		{"escaped binding with its header", "escaped", `{"region":"eu"}`, map[string]string{"Mcp-Param-Region": "eu"}, true},
		{"Mcp-Name of another tool", "plain", `{}`, map[string]string{mcp.HeaderName: "bound"}, false},
		{"no Mcp-Method", "plain", `{}`, map[string]string{mcp.HeaderMethod: ""}, false},
		{"another version in the header", "plain", `{}`, map[string]string{mcp.HeaderProtocolVersion: "2025-11-25"}, false},
		{"Last-Event-ID", "plain", `{}`, map[string]string{mcp.HeaderLastEventID: "3"}, false},
		{"unknown tool", "nope", `{}`, nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			h.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
			h.Set(mcp.HeaderMethod, "tools/call")
			h.Set(mcp.HeaderName, tt.tool)
			for k, v := range tt.headers {
				if v == "" {
					h.Del(k)
					continue
				}
				h.Set(k, v)
			}
			params := json.RawMessage(fmt.Sprintf(`{"name":%q,"arguments":%s,"_meta":{%s}}`, tt.tool, tt.args, modernMembers))
			if got := p.modernHeaders(h, era, tt.tool, params); got != tt.want {
				t.Errorf("modernHeaders = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestLanesTakeEveryIDSpelling: both lanes take a call whatever the
// spelling of its string or number id, answer with the id the MCP server
// would write (wire.ServerID), and find it again from a cancellation that
// spells the id as the call did; an id of another kind is the server's.
func TestLanesTakeEveryIDSpelling(t *testing.T) {
	ids := []string{`1.0`, `-0`, `1e3`, `"\u0041"`, `12345678901234567890`, `2.5`}
	for _, front := range []string{"stdio", "http"} {
		t.Run(front, func(t *testing.T) {
			var p *Proxy
			var send func(body string) string
			if front == "stdio" {
				l := newLane(t, true)
				p, send = l.p, func(body string) string { l.send(body); return l.answer() }
			} else {
				h := newHTTPSide(t, true)
				p, send = h.p, func(body string) string {
					_, text, _ := h.post(nil, body) // content type, id, answer
					if i := strings.Index(text, "{"); i >= 0 {
						return text[i:]
					}
					return text
				}
			}
			for _, id := range ids {
				before := p.fastTaken.Load()
				a := send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{"message":"id"}}}`)
				want, _ := wire.ServerID(json.RawMessage(id))
				var env struct{ ID json.RawMessage }
				if err := json.Unmarshal([]byte(a), &env); err != nil || string(env.ID) != string(want) || !strings.Contains(a, `"id"`) {
					t.Errorf("id %s: answered %s, want id %s", id, a, want)
				}
				if n := p.fastTaken.Load() - before; n != 1 {
					t.Errorf("id %s: the lane took %d calls, want 1", id, n)
				}
			}
			before := p.fastTaken.Load()
			send(`{"jsonrpc":"2.0","id":{"x":1},"method":"tools/call","params":{"name":"echo","arguments":{"message":"id"}}}`)
			if n := p.fastTaken.Load() - before; n != 0 {
				t.Errorf("an object id: the lane took %d calls, want it left to the server", n)
			}
		})
	}
	// A cancellation spelled as the call's id reaches the call on the
	// stdio lane (the HTTP lane's is TestCancelKey's).
	l := newLane(t, true)
	allows := l.allows()
	l.send(`{"jsonrpc":"2.0","id":12.0,"method":"tools/call","params":{"name":"slow","arguments":{"ms":5000}}}`)
	l.waitAllows(allows + 1)
	l.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":12.0,"reason":"user"}}`)
	if a := l.answer(); !strings.Contains(a, `"id":12`) || !strings.Contains(a, "cancelled by the client") {
		t.Errorf("the cancelled call answered %s", a)
	}
}
