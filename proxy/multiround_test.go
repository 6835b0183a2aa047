package proxy

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// multiRoundPlan allows the multi-round test upstream's tool, resources and
// prompt (internal/testkit/testupstream, mode multi-round).
const multiRoundPlan = `
plan "mr" {
  goal  = "multi-round results"
  order = "any"
  step "ask" {
    tool      = "ask"
    max_calls = 20
    arg "resultType" { max_length = 20 }
  }
  resource "ask" {
    uri_pattern = "test://ask/.*"
    max_reads   = 20
  }
  prompt "ask" {
    arg "resultType" { max_length = 20 }
    max_calls = 20
  }
}`

// multiRoundScript is what a client may send about multi-round results:
// the upstream answers each "ask" with the resultType asked for, and a
// retry carries what a client of protocol 2026-07-28 sends back.
var multiRoundScript = []struct {
	name, body string
	want       string // in the answer
	forwarded  bool   // reaches the upstream and is counted
	complete   bool   // answered as a completed call
}{
	{"input_required", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","arguments":{"resultType":"input_required"}}}`,
		`the upstream asked for input (resultType \"input_required\"), which this plan does not allow`, true, false},
	{"task", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask","arguments":{"resultType":"task"}}}`,
		`the upstream returned a task (resultType \"task\"), which this plan does not allow`, true, false},
	{"unknown type", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"ask","arguments":{"resultType":"partial"}}}`,
		`the upstream returned a result of type partial, which this plan does not allow`, true, false},
	{"type not a string", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"ask","arguments":{"resultType":"number"}}}`,
		`the upstream returned a result of type 7`, true, false},
	{"complete with inputRequests", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"ask","arguments":{"resultType":"complete"}}}`,
		`call done`, true, true},
	{"no type with inputRequests", `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"ask","arguments":{"resultType":"absent"}}}`,
		`call done`, true, true},
	{"null type", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask","arguments":{"resultType":"null"}}}`,
		`call done`, true, true},
	{"retry with answers", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"ask","arguments":{"resultType":"complete"},` +
		`"inputResponses":{"password":{"action":"accept","content":{"password":"hunter2"}}},"requestState":"upstream-state-1"}}`,
		`tools/call retry refused: the requestState is not one planlock issued; it was not forwarded`, false, false},
	{"retry with state only", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"ask","arguments":{"resultType":"complete"},"requestState":"upstream-state-1"}}`,
		`tools/call retry refused: the requestState is not one planlock issued`, false, false},
	{"retry with empty answers", `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"ask","arguments":{"resultType":"complete"},"inputResponses":{}}}`,
		`tools/call retry refused: it carries inputResponses without a requestState`, false, false},
	{"read input_required", `{"jsonrpc":"2.0","id":11,"method":"resources/read","params":{"uri":"test://ask/input_required"}}`,
		`the upstream asked for input`, true, false},
	{"read task", `{"jsonrpc":"2.0","id":12,"method":"resources/read","params":{"uri":"test://ask/task"}}`,
		`the upstream returned a task`, true, false},
	{"read complete", `{"jsonrpc":"2.0","id":13,"method":"resources/read","params":{"uri":"test://ask/complete"}}`,
		`read done`, true, true},
	{"read retry", `{"jsonrpc":"2.0","id":14,"method":"resources/read","params":{"uri":"test://ask/complete","inputResponses":{"password":{"action":"accept","content":{"password":"hunter2"}}}}}`,
		`resources/read retry refused: it carries inputResponses without a requestState`, false, false},
	{"get input_required", `{"jsonrpc":"2.0","id":15,"method":"prompts/get","params":{"name":"ask","arguments":{"resultType":"input_required"}}}`,
		`the upstream asked for input`, true, false},
	{"get task", `{"jsonrpc":"2.0","id":16,"method":"prompts/get","params":{"name":"ask","arguments":{"resultType":"task"}}}`,
		`the upstream returned a task`, true, false},
	{"get complete", `{"jsonrpc":"2.0","id":17,"method":"prompts/get","params":{"name":"ask","arguments":{"resultType":"complete"}}}`,
		`prompt done`, true, true},
	{"get retry", `{"jsonrpc":"2.0","id":18,"method":"prompts/get","params":{"name":"ask","arguments":{"resultType":"complete"},"requestState":"upstream-state-1"}}`,
		`prompts/get retry refused: the requestState is not one planlock issued`, false, false},
}

// TestMultiRoundResultsAreNotRelayed runs multiRoundScript over stdio and
// HTTP, each with its fast lane on and off (a client of protocol
// 2025-06-18): a result that is not complete ends the call with an error
// that shows nothing the upstream asked, counts once and is recorded as a
// failed outcome; a retry's fields are refused before anything is
// forwarded or counted; the lanes answer and record as the server does.
func TestMultiRoundResultsAreNotRelayed(t *testing.T) {
	type side struct {
		answers  []string
		audit    string
		callsLog string
		p        *Proxy
	}
	run := func(t *testing.T, httpFront, fast bool) side {
		calls := filepath.Join(t.TempDir(), "calls.jsonl")
		args := []string{"--mode", "multi-round", "--calls-log", calls}
		var s side
		s.callsLog = calls
		if httpFront {
			h := newHTTPSidePlan(t, multiRoundPlan, fast, nil, args...)
			for _, st := range multiRoundScript {
				_, text, _ := h.post(nil, st.body)
				s.answers = append(s.answers, text)
			}
			s.audit, s.p = h.audit, h.p
			return s
		}
		l := newLaneUpstream(t, multiRoundPlan, fast, nil, args...)
		for _, st := range multiRoundScript {
			l.send(st.body)
			s.answers = append(s.answers, canonical(t, l.answer()))
		}
		s.audit, s.p = l.audit, l.p
		return s
	}
	for _, front := range []string{"stdio", "http"} {
		t.Run(front, func(t *testing.T) {
			slow, fast := run(t, front == "http", false), run(t, front == "http", true)
			for i, st := range multiRoundScript {
				if slow.answers[i] != fast.answers[i] {
					t.Errorf("%s: answers differ\nserver:    %s\nfast lane: %s", st.name, slow.answers[i], fast.answers[i])
				}
				a := slow.answers[i]
				if !strings.Contains(a, st.want) {
					t.Errorf("%s: answer %s, want %q in it", st.name, a, st.want)
				}
				failed := strings.Contains(a, `"isError":true`) || strings.Contains(a, `"error":`)
				if failed == st.complete {
					t.Errorf("%s: answer %s, want complete %v", st.name, a, st.complete)
				}
				for _, leak := range []string{"enter your password", "say the secret", "upstream-state-1", `inputRequests\":`, `"inputRequests":`, `"requestState":`, "hunter2"} {
					if strings.Contains(a, leak) {
						t.Errorf("%s: the answer shows %q of what the upstream asked: %s", st.name, leak, a)
					}
				}
			}
			a, b := auditLines(t, slow.audit), auditLines(t, fast.audit)
			if !reflect.DeepEqual(a, b) {
				t.Errorf("audit records differ:\nserver:\n%s\nfast lane:\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
			}
			for _, s := range []side{slow, fast} {
				checkMultiRoundRecords(t, s.p, s.audit, s.callsLog)
			}
		})
	}
}

// checkMultiRoundRecords checks what the script left: one count, one allow
// and one outcome per forwarded request, the outcome an error with the
// reason for each result that was not complete; a block and nothing
// upstream for each retry.
func checkMultiRoundRecords(t *testing.T, p *Proxy, audit, callsLog string) {
	t.Helper()
	wantForwarded := map[string]int{}
	wantFailed := map[string]int{}
	wantBlocked := 0
	for _, st := range multiRoundScript {
		method := methodOf(t, st.body)
		switch {
		case !st.forwarded:
			wantBlocked++
		case st.complete:
			wantForwarded[method]++
		default:
			wantForwarded[method]++
			wantFailed[method]++
		}
	}
	tool := func(r map[string]any) string {
		switch r["tool"] {
		case "ask":
			return "tools/call"
		}
		s, _ := r["tool"].(string)
		return s
	}
	allowed, failed := map[string]int{}, map[string]int{}
	blocked := 0
	seqTool := map[float64]string{}
	for _, r := range readAudit(t, audit) {
		switch {
		case r["type"] == "decision" && r["decision"] == "allow":
			allowed[tool(r)]++
			seq, _ := r["seq"].(float64)
			seqTool[seq] = tool(r)
		case r["type"] == "decision" && r["decision"] == "block":
			if reason, _ := r["reason"].(string); !strings.Contains(reason, "carries inputResponses or requestState, but planlock asked for no input") &&
				!strings.Contains(reason, "retry refused: ") {
				t.Errorf("a block with reason %q", reason)
			}
			blocked++
		case r["type"] == "outcome":
			if ok, _ := r["ok"].(bool); ok {
				continue
			}
			msg, _ := r["error"].(string)
			if !strings.Contains(msg, "the upstream asked for input") && !strings.Contains(msg, "the upstream returned a") {
				t.Errorf("a failed outcome with error %q", msg)
			}
			ref, _ := r["ref"].(float64)
			failed[seqTool[ref]]++
		}
	}
	if !reflect.DeepEqual(allowed, wantForwarded) {
		t.Errorf("allowed %v, want %v", allowed, wantForwarded)
	}
	if !reflect.DeepEqual(failed, wantFailed) {
		t.Errorf("failed outcomes %v, want %v", failed, wantFailed)
	}
	if blocked != wantBlocked {
		t.Errorf("%d blocks, want %d (one per retry)", blocked, wantBlocked)
	}
	plan := p.cur.Load().plan
	pr := p.cfg.State.Progress(plan.Digest)
	if got := pr.Calls(0); got != wantForwarded["tools/call"] {
		t.Errorf("step ask counted %d calls, want %d", got, wantForwarded["tools/call"])
	}
	if got := pr.Calls(resourceIndex(plan, 0)); got != wantForwarded["resources/read"] {
		t.Errorf("resource ask counted %d reads, want %d", got, wantForwarded["resources/read"])
	}
	if got := pr.Calls(promptIndex(plan, 0)); got != wantForwarded["prompts/get"] {
		t.Errorf("prompt ask counted %d gets, want %d", got, wantForwarded["prompts/get"])
	}
	b, err := os.ReadFile(callsLog)
	if err != nil {
		t.Fatal(err)
	}
	upstream := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.Contains(line, "inputResponses") || strings.Contains(line, "requestState") {
			t.Errorf("a retry reached the upstream: %s", line)
		}
		var r struct{ Tool string }
		_ = json.Unmarshal([]byte(line), &r)
		upstream[r.Tool]++
	}
	if !reflect.DeepEqual(upstream, wantForwarded) {
		t.Errorf("the upstream got %v, want %v", upstream, wantForwarded)
	}
}

func methodOf(t *testing.T, body string) string {
	t.Helper()
	var m struct{ Method string }
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatal(err)
	}
	return m.Method
}

// auditLines is an audit log's records without the fields of time and the
// hash chain, for comparing two runs.
func auditLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		out = append(out, canonical(t, line, "time", "latency_ms", "hash", "prev", "expires", "state_sha256", "state", "ref"))
	}
	return out
}

// askedHandlers are a client's elicitation and sampling handlers, which
// count how often the client was made to run them.
type askedHandlers struct{ elicited, sampled atomic.Int32 }

func (h *askedHandlers) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	h.elicited.Add(1)
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept,
		Content: map[string]any{"password": "hunter2"}}}, nil
}

func (h *askedHandlers) CreateMessage(context.Context, mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	h.sampled.Add(1)
	return &mcp.CreateMessageResult{SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("the secret")}, Model: "m"}, nil
}

// clientHandlers are what a test client answers input requests with.
type clientHandlers interface {
	client.ElicitationHandler
	client.SamplingHandler
}

// realClient connects an mcp-go v1.2.1 client, with h as its elicitation
// and sampling handlers, to a proxy served in process over stdio or HTTP
// in front of the test upstream started with upstreamArgs. version pins
// the client's protocol ("" is the client's default, 2026-07-28).
func realClient(t *testing.T, planText, front, version string, h clientHandlers, upstreamArgs ...string) (*client.Client, *Proxy, string) {
	t.Helper()
	p, l, audit := laneProxy(t, planText, true, nil, upstreamArgs...)
	t.Cleanup(func() { l.Close() }) // after the client's and the proxy's
	c := eraClientWith(t, p, front, version, h)
	want := version
	if want == "" {
		want = mcp.ProtocolVersion20260728
	}
	if got := c.ProtocolVersion(); got != want {
		t.Fatalf("the client speaks %q, want %q", got, want)
	}
	return c, p, audit
}

// TestMultiRoundRealClients: an mcp-go v1.2.1 client of either era, with
// elicitation and sampling handlers, over stdio and HTTP, is never made to
// run them by an upstream's input_required result (a modern client would
// run them itself; for a legacy one mcp-go's server would send the old
// server-to-client requests), and gets the plan's error for the call, the
// read and the get, each counted once.
func TestMultiRoundRealClients(t *testing.T) {
	for _, front := range []string{"stdio", "http"} {
		for _, version := range []string{"", mcp.LATEST_LEGACY_PROTOCOL_VERSION} {
			name := front + "/" + version
			if version == "" {
				name = front + "/modern"
			}
			t.Run(name, func(t *testing.T) {
				calls := filepath.Join(t.TempDir(), "calls.jsonl")
				h := &askedHandlers{}
				c, p, _ := realClient(t, multiRoundPlan, front, version, h, "--mode", "multi-round", "--calls-log", calls)
				// Bounded: a client made to wait on its own handlers (or
				// on a retry) fails here instead of hanging.
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				req := mcp.CallToolRequest{}
				req.Params.Name = "ask"
				req.Params.Arguments = map[string]any{"resultType": "input_required"}
				res, err := c.CallTool(ctx, req)
				if err != nil {
					t.Fatalf("call: %v", err)
				}
				if !res.IsError || len(res.Content) != 1 || !strings.Contains(firstText(res), "the upstream asked for input") ||
					!res.ResultType.IsComplete() || len(res.InputRequests) > 0 || res.RequestState != "" {
					t.Errorf("call answered %+v", res)
				}
				rr := mcp.ReadResourceRequest{}
				rr.Params.URI = "test://ask/input_required"
				if _, err := c.ReadResource(ctx, rr); err == nil || !strings.Contains(err.Error(), "the upstream asked for input") {
					t.Errorf("read: %v, want the plan's error", err)
				}
				gr := mcp.GetPromptRequest{}
				gr.Params.Name = "ask"
				gr.Params.Arguments = map[string]string{"resultType": "input_required"}
				if _, err := c.GetPrompt(ctx, gr); err == nil || !strings.Contains(err.Error(), "the upstream asked for input") {
					t.Errorf("get: %v, want the plan's error", err)
				}
				if e, s := h.elicited.Load(), h.sampled.Load(); e != 0 || s != 0 {
					t.Errorf("the client ran its elicitation handler %d times and its sampling handler %d times", e, s)
				}
				plan := p.cur.Load().plan
				pr := p.cfg.State.Progress(plan.Digest)
				if a, r, g := pr.Calls(0), pr.Calls(resourceIndex(plan, 0)), pr.Calls(promptIndex(plan, 0)); a != 1 || r != 1 || g != 1 {
					t.Errorf("counted %d calls, %d reads, %d gets; want one each", a, r, g)
				}
				b, err := os.ReadFile(calls)
				if err != nil {
					t.Fatal(err)
				}
				if n := strings.Count(string(b), "\n"); n != 3 || strings.Contains(string(b), "inputResponses") {
					t.Errorf("the upstream got %d requests, want 3 and no retry:\n%s", n, b)
				}
			})
		}
	}
}

// unknownTypePlan pins a step on a result that is not complete yet carries
// the structured content the pin reads, and allows the prompt whose
// argument completions the upstream answers raw.
const unknownTypePlan = `
plan "types" {
  goal  = "results of types the gate does not relay"
  order = "any"
  step "ask" {
    tool      = "ask"
    max_calls = 5
    arg "resultType" { max_length = 20 }
    pin {
      tool  = "ask"
      args  = { resultType = "structured" }
      field = "status"
      eq    = "ok"
    }
  }
  prompt "ask" {
    arg "resultType" { max_length = 20 }
    max_calls = 5
  }
}`

// TestUnknownResultTypesAreNotRead: planlock reads nothing out of an
// upstream result that is not a complete one, wherever it asked: a pin
// read answered input_required (with the pinned field in its structured
// content) is a failed pin read, and the call is not forwarded; a
// completion/complete answered with a result type the gate does not know
// is an error, not its values.
func TestUnknownResultTypesAreNotRead(t *testing.T) {
	calls := filepath.Join(t.TempDir(), "calls.jsonl")
	l := newLaneUpstream(t, unknownTypePlan, true, nil, "--mode", "multi-round", "--calls-log", calls)
	l.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","arguments":{"resultType":"complete"}}}`)
	a := l.answer()
	if strings.Contains(a, "call done") || !strings.Contains(a, `pin read ask`) || !strings.Contains(a, `input_required`) {
		t.Errorf("a call pinned on an input_required result was answered %s; want the pin read failed on its result type", a)
	}
	for _, line := range upstreamCalls(t, calls) {
		if strings.Contains(line, `"complete"`) {
			t.Errorf("the call reached the upstream: %s", line)
		}
	}
	for _, rt := range []string{"input_required", "weird", "task"} {
		l.send(`{"jsonrpc":"2.0","id":2,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"ask"},"argument":{"name":"resultType","value":"raw:` + rt + `"}}}`)
		a = l.answer()
		if strings.Contains(a, "completion done") || !strings.Contains(a, `"error"`) || !strings.Contains(a, rt) {
			t.Errorf("a completion of result type %s was answered %s; want an error naming the type", rt, a)
		}
	}
	// A completion the upstream completes is still relayed.
	l.send(`{"jsonrpc":"2.0","id":3,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"ask"},"argument":{"name":"resultType","value":"tw"}}}`)
	if a = l.answer(); !strings.Contains(a, `"twice"`) {
		t.Errorf("a complete completion was answered %s", a)
	}
}
