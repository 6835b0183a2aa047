package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/planlock/planlock/proxy/ledger"
)

// httpFastPlan is fastPlan with the conformance tools that log while they
// run and answer a tool error.
var httpFastPlan = lanePlan(6, `
  step "logging" {
    tool      = "test_tool_with_logging"
    max_calls = 2
  }
  step "fails" {
    tool      = "test_error_handling"
    max_calls = 2
  }`+progressStep)

// modernCall is the headers of a modern tools/call of tool over HTTP,
// without a session.
func modernCall(tool string) map[string]string { return modernHeaders("tools/call", tool) }

// modernHTTPScript is what only a client of protocol 2026-07-28 sends over
// HTTP: no session, the era in the header and _meta, the standard headers.
func modernHTTPScript() []httpStep {
	meta := `"_meta":{` + modernMembers + `}`
	call := func(id int, tool, args string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s,%s}}`, id, tool, args, meta)
	}
	with := func(h map[string]string, k, v string) map[string]string {
		out := map[string]string{}
		for a, b := range h {
			out[a] = b
		}
		out[k] = v
		return out
	}
	stray := modernCall("slow")
	delete(stray, server.HeaderKeySessionID) // the session's ID, which the era ignores
	return []httpStep{
		{name: "modern", headers: modernCall("slow"), bodies: []string{call(50, "slow", `{"ms":1}`)}},
		{name: "modern with a stray session ID", headers: stray, bodies: []string{call(51, "slow", `{"ms":1}`)}},
		{name: "modern argument over its bound", headers: modernCall("slow"), bodies: []string{call(52, "slow", `{"ms":99999}`)}},
		{name: "modern tool outside the plan", headers: modernCall("flood"), bodies: []string{call(53, "flood", `{}`)}},
		{name: "modern unknown tool", headers: modernCall("nope"), bodies: []string{call(54, "nope", `{}`)}},
		{name: "modern upstream tool error", headers: modernCall("test_error_handling"), bodies: []string{call(55, "test_error_handling", `{}`)}},
		{name: "modern approval each holds", headers: modernCall("big"), bodies: []string{call(56, "big", `{"bytes":30}`)}},
		{name: "modern timeout", headers: modernCall("slow"), bodies: []string{call(57, "slow", `{"ms":5000}`)}},
		{name: "modern cancelled by the client", headers: modernCall("slow"), bodies: []string{call(58, "slow", `{"ms":5000}`),
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":58,"reason":"user",` + meta + `}}`}},
		{name: "modern with a progress token", headers: modernCall("progress"),
			bodies: []string{`{"jsonrpc":"2.0","id":59,"method":"tools/call","params":{"name":"progress","arguments":{"steps":2},"_meta":{"progressToken":"p",` + modernMembers + `}}}`}},
		{name: "modern, Mcp-Name not the body's", headers: modernCall("echo"), bodies: []string{call(60, "slow", `{"ms":1}`)}},
		{name: "modern without Mcp-Method", headers: with(modernCall("slow"), mcp.HeaderMethod, ""), bodies: []string{call(61, "slow", `{"ms":1}`)}},
		{name: "modern with a Last-Event-ID", headers: with(modernCall("slow"), mcp.HeaderLastEventID, "1"), bodies: []string{call(62, "slow", `{"ms":1}`)}},
		{name: "modern header, legacy body", headers: modernCall("slow"), bodies: []string{`{"jsonrpc":"2.0","id":63,"method":"tools/call","params":{"name":"slow","arguments":{"ms":1}}}`}},
		{name: "modern header of another version", headers: with(modernCall("slow"), mcp.HeaderProtocolVersion, "2099-01-01"), bodies: []string{call(64, "slow", `{"ms":1}`)}},
		{name: "modern without client capabilities", headers: modernCall("slow"),
			bodies: []string{`{"jsonrpc":"2.0","id":65,"method":"tools/call","params":{"name":"slow","arguments":{"ms":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`}},
		{name: "modern retry", headers: modernCall("slow"),
			bodies: []string{`{"jsonrpc":"2.0","id":66,"method":"tools/call","params":{"name":"slow","arguments":{"ms":1},"inputResponses":{},` + meta + `}}`}},
	}
}

// httpSide is one proxy served over streamable HTTP with one initialised
// session, driven by raw requests.
type httpSide struct {
	t     *testing.T
	url   string
	sid   string
	audit string
	p     *Proxy
}

func newHTTPSide(t *testing.T, fast bool, upstreamArgs ...string) *httpSide {
	t.Helper()
	return newHTTPSideWith(t, fast, nil, upstreamArgs...)
}

// newHTTPSideWith is newHTTPSide with the ledger wrapped by wrap (nil: as is).
func newHTTPSideWith(t *testing.T, fast bool, wrap func(*ledger.Ledger) State, upstreamArgs ...string) *httpSide {
	t.Helper()
	return newHTTPSidePlan(t, httpFastPlan, fast, wrap, upstreamArgs...)
}

// newHTTPSidePlan is newHTTPSideWith with a plan of its own.
func newHTTPSidePlan(t *testing.T, planText string, fast bool, wrap func(*ledger.Ledger) State, upstreamArgs ...string) *httpSide {
	t.Helper()
	p, l, audit := laneProxy(t, planText, fast, wrap, upstreamArgs...)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = p.ServeListenerWith(ctx, ln, HTTPOptions{})
	}()
	t.Cleanup(func() {
		cancel()
		<-served
		l.Close()
	})
	if err := p.WaitUpstream(ctx); err != nil && len(upstreamArgs) == 0 {
		t.Fatal(err)
	}
	s := &httpSide{t: t, url: "http://" + ln.Addr().String() + "/mcp", audit: audit, p: p}
	_, _, h := s.post(nil, initBody)
	if s.sid = h.Get(server.HeaderKeySessionID); s.sid == "" {
		t.Fatal("initialize answered no session")
	}
	if code, _, _ := s.post(nil, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d", code)
	}
	return s
}

// post sends body in the session (headers adds or overrides headers) and
// returns the status, the answer normalised (answerText) and the headers.
func (s *httpSide) post(headers map[string]string, body string) (int, string, http.Header) {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.sid != "" {
		req.Header.Set(server.HeaderKeySessionID, s.sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	for k, v := range headers {
		switch {
		case k == "Host":
			req.Host = v
		case v == "":
			req.Header.Del(k)
		default:
			req.Header.Set(k, v)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		s.t.Fatalf("post: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("read the answer: %v", err)
	}
	return resp.StatusCode, s.answerText(resp.Header.Get("Content-Type"), string(b)), resp.Header
}

// answerText is an answer's content type and its messages, each with its
// id as written and its JSON canonical (keys sorted, hold ids replaced);
// an event stream is read event by event. A body that is not JSON is kept.
func (s *httpSide) answerText(ctype, body string) string {
	var msgs []string
	if strings.HasPrefix(ctype, "text/event-stream") {
		for _, line := range strings.Split(body, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				msgs = append(msgs, d)
			}
		}
	} else if strings.TrimSpace(body) != "" {
		msgs = append(msgs, strings.TrimSpace(body))
	}
	out := []string{ctype}
	for _, m := range msgs {
		var env struct{ ID json.RawMessage }
		if json.Unmarshal([]byte(m), &env) != nil {
			out = append(out, m)
			continue
		}
		out = append(out, string(env.ID)+" "+canonical(s.t, m))
	}
	return strings.Join(out, "\n")
}

func (s *httpSide) allows() int {
	b, _ := os.ReadFile(s.audit)
	return strings.Count(string(b), `"decision":"allow"`)
}

func (s *httpSide) records() []string {
	b, err := os.ReadFile(s.audit)
	if err != nil {
		s.t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		out = append(out, canonical(s.t, line, "time", "latency_ms", "hash", "prev", "expires", "state_sha256", "state", "ref"))
	}
	return out
}

// httpStep is one step of a script: its first body is posted and answered
// while the others are posted (once the first is allowed, for a step in
// afterAllow), each answered on its own.
type httpStep struct {
	name    string
	headers map[string]string
	bodies  []string
}

// run posts each step's bodies and returns every answer (status and text).
func (s *httpSide) run(script []httpStep) []string {
	var out []string
	for _, st := range script {
		allows := s.allows()
		first := make(chan string, 1)
		go func() {
			code, text, _ := s.post(st.headers, st.bodies[0])
			first <- st.name + ": " + http.StatusText(code) + "\n" + text
		}()
		var rest []string
		for i, b := range st.bodies[1:] {
			if i == 0 && afterAllow[st.name] {
				deadline := time.Now().Add(20 * time.Second)
				for s.allows() < allows+1 && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
			}
			code, text, _ := s.post(st.headers, b)
			rest = append(rest, http.StatusText(code)+"\n"+text)
		}
		out = append(out, <-first)
		out = append(out, rest...)
	}
	return out
}

// httpScript is fastScript over HTTP, with what only HTTP has: a log
// message routed to the call's answer, header variants, bodies the server
// refuses, batches and notifications.
func httpScript() []httpStep {
	var script []httpStep
	for _, st := range fastScript {
		script = append(script, httpStep{name: st.name, bodies: st.lines})
	}
	return append(script,
		httpStep{name: "log messages during the call", bodies: []string{`{"jsonrpc":"2.0","id":30,"method":"tools/call","params":{"name":"test_tool_with_logging","arguments":{}}}`}},
		httpStep{name: "upstream tool error", bodies: []string{`{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"name":"test_error_handling"}}`}},
		httpStep{name: "malformed JSON", bodies: []string{`{"jsonrpc":"2.0","id":32,"method":"tools/call","params":{"name":"echo"`}},
		httpStep{name: "trailing text", bodies: []string{`{"jsonrpc":"2.0","id":33,"method":"tools/call","params":{"name":"echo","arguments":{"message":"t"}}} x`}},
		httpStep{name: "batch", bodies: []string{`[{"jsonrpc":"2.0","id":34,"method":"tools/call","params":{"name":"echo","arguments":{"message":"b"}}}]`}},
		httpStep{name: "result member", bodies: []string{`{"jsonrpc":"2.0","id":35,"method":"tools/call","result":{},"params":{"name":"echo","arguments":{"message":"r"}}}`}},
		httpStep{name: "no params", bodies: []string{`{"jsonrpc":"2.0","id":36,"method":"tools/call"}`}},
		httpStep{name: "unknown protocol version", headers: map[string]string{"Mcp-Protocol-Version": "1999-01-01"},
			bodies: []string{`{"jsonrpc":"2.0","id":37,"method":"tools/call","params":{"name":"echo","arguments":{"message":"v"}}}`}},
		httpStep{name: "no protocol version", headers: map[string]string{"Mcp-Protocol-Version": ""},
			bodies: []string{`{"jsonrpc":"2.0","id":38,"method":"tools/call","params":{"name":"echo","arguments":{"message":"nv"}}}`}},
		httpStep{name: "content type with a charset", headers: map[string]string{"Content-Type": "application/json; charset=utf-8"},
			bodies: []string{`{"jsonrpc":"2.0","id":39,"method":"tools/call","params":{"name":"slow","arguments":{"ms":1}}}`}},
		httpStep{name: "not JSON content", headers: map[string]string{"Content-Type": "text/plain"},
			bodies: []string{`{"jsonrpc":"2.0","id":40,"method":"tools/call","params":{"name":"slow","arguments":{"ms":1}}}`}},
		httpStep{name: "foreign host", headers: map[string]string{"Host": "example.com"},
			bodies: []string{`{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"slow","arguments":{"ms":1}}}`}},
		httpStep{name: "cancel of no call", bodies: []string{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":999}}`}},
		httpStep{name: "a notification", bodies: []string{`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`}},
		httpStep{name: "ping", bodies: []string{`{"jsonrpc":"2.0","id":42,"method":"ping"}`}},
	)
}

// TestHTTPFastLaneTakesModernCalls: the HTTP lane takes the calls of
// protocol 2026-07-28 (no session, the standard headers), and answers them
// as that era's: resultType and the server's identity in every result.
func TestHTTPFastLaneTakesModernCalls(t *testing.T) {
	s := newHTTPSide(t, true)
	for i, body := range laneModernCalls {
		var env struct {
			Params struct{ Name string }
		}
		if err := json.Unmarshal([]byte(body), &env); err != nil {
			t.Fatal(err)
		}
		before := s.p.fastTaken.Load()
		code, text, h := s.post(modernCall(env.Params.Name), body)
		if code != http.StatusOK || !strings.Contains(text, `"resultType":"complete"`) || !strings.Contains(text, `"io.modelcontextprotocol/serverInfo":{"name":"planlock"`) {
			t.Errorf("call %d: not a modern answer: %d %s", i+1, code, text)
		}
		if sid := h.Get(server.HeaderKeySessionID); sid != "" {
			t.Errorf("call %d: answered with session ID %q", i+1, sid)
		}
		if n := s.p.fastTaken.Load() - before; n != 1 {
			t.Errorf("call %d: the fast lane took %d calls, want 1", i+1, n)
		}
	}
}

// TestHTTPFastLaneAnswersAsTheServer runs one script against the proxy
// over streamable HTTP with and without the HTTP fast lane: the answers
// (status, every message of an event stream), the audit records and the
// counts must be the same, and the lane must have taken the plain calls.
//
// Two differences are the server's own, and allowed: once any notification
// was sent to a session, mcp-go answers every later request of it as an
// event stream (the lane only the calls a notification was written to;
// both are the transport's), and mcp-go may lose a notification that comes
// just before the call's answer (its forwarder takes it off the queue after
// the answer's drain), which the lane writes.
func TestHTTPFastLaneAnswersAsTheServer(t *testing.T) {
	slow, fast := newHTTPSide(t, false, "--conformance"), newHTTPSide(t, true, "--conformance")
	script := append(httpScript(), modernHTTPScript()...)
	a, b := slow.run(script), fast.run(script)
	streamed := false // the server has answered the session with an event stream
	for i := range a {
		sa, sb := strings.Split(a[i], "\n"), strings.Split(b[i], "\n")
		if strings.HasSuffix(sa[0], "progress token: OK") {
			// Each progress notification, then the answer. The server may
			// lose a notification that comes just before the answer (see
			// above); the answers are the same.
			if sa[len(sa)-1] != sb[len(sb)-1] {
				t.Errorf("answers differ\nserver:\n%s\nfast lane:\n%s", a[i], b[i])
			}
			if len(sb) < 4 || sb[1] != "text/event-stream" || !strings.Contains(sb[2], `"method":"notifications/progress"`) {
				t.Errorf("the fast lane's answer to a call with a progress token:\n%s", b[i])
			}
			streamed = true
			continue
		}
		if strings.HasPrefix(sa[0], "log messages during the call") {
			// Every log message the upstream sent while the call ran, then
			// the answer; the server's are some of them.
			// The upstream (mcp-go's stdio server) may write its last one
			// after its answer.
			want := []string{"Tool execution started", "Tool processing data"}
			if len(sb) < 2+len(want)+1 || sb[1] != "text/event-stream" {
				t.Errorf("the fast lane's answer to a call that logs:\n%s", b[i])
			} else {
				for j, w := range want {
					if !strings.Contains(sb[2+j], w) {
						t.Errorf("log message %d: %s, want %q", j, sb[2+j], w)
					}
				}
			}
			if sa[len(sa)-1] != sb[len(sb)-1] {
				t.Errorf("answers differ\nserver:\n%s\nfast lane:\n%s", a[i], b[i])
			}
			streamed = true
			continue
		}
		if streamed {
			// A log message the upstream wrote after its answer reaches
			// whichever call is in flight then, or none.
			sa, sb = withoutLogs(sa), withoutLogs(sb)
			if len(sa) > 1 && len(sb) > 1 && (sa[1] == "text/event-stream" || sb[1] == "text/event-stream") {
				sa[1], sb[1] = "(stream or JSON)", "(stream or JSON)"
			}
		}
		if x, y := strings.Join(sa, "\n"), strings.Join(sb, "\n"); x != y {
			t.Errorf("answers differ\nserver:\n%s\nfast lane:\n%s", x, y)
		}
	}
	if n := fast.p.fastTaken.Load(); n < 18 {
		t.Errorf("the fast lane took %d calls, want the 18 plain ones of both eras at least", n)
	}
	if n := slow.p.fastTaken.Load(); n != 0 {
		t.Errorf("the fast lane took %d calls while off", n)
	}
	ra, rb := slow.records(), fast.records()
	if !reflect.DeepEqual(ra, rb) {
		t.Errorf("audit records differ:\nserver:\n%s\nfast lane:\n%s", strings.Join(ra, "\n"), strings.Join(rb, "\n"))
	}
	if len(ra) < 20 {
		t.Errorf("only %d audit records: the script did not run", len(ra))
	}
	digest := slow.p.cur.Load().plan.Digest
	for i := range slow.p.cur.Load().plan.Steps {
		if x, y := slow.p.cfg.State.Progress(digest).Calls(i), fast.p.cfg.State.Progress(digest).Calls(i); x != y {
			t.Errorf("step %d counted %d calls through the server, %d through the fast lane", i, x, y)
		}
	}
}

// withoutLogs drops the log messages from an answer's lines.
func withoutLogs(lines []string) []string {
	var out []string
	for _, l := range lines {
		if !strings.Contains(l, `"method":"notifications/message"`) {
			out = append(out, l)
		}
	}
	return out
}

// TestHTTPFastLaneUpstreamDies: a call during which the upstream exits is
// answered and recorded alike on both paths. (What the next call finds
// depends on how far the restart got.)
func TestHTTPFastLaneUpstreamDies(t *testing.T) {
	script := []httpStep{
		{name: "the upstream exits", bodies: []string{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"x"}}}`}},
	}
	slow, fast := newHTTPSide(t, false, "--mode", "exit-mid-call"), newHTTPSide(t, true, "--mode", "exit-mid-call")
	a, b := slow.run(script), fast.run(script)
	t.Logf("answers:\n%s\n%s", a[0], b[0])
	for i := range a {
		if a[i] != b[i] {
			t.Errorf("answers differ\nserver:\n%s\nfast lane:\n%s", a[i], b[i])
		}
	}
	if n := fast.p.fastTaken.Load(); n < 1 {
		t.Error("the fast lane took no call")
	}
	if ra, rb := slow.records(), fast.records(); !reflect.DeepEqual(ra, rb) {
		t.Errorf("audit records differ:\nserver:\n%s\nfast lane:\n%s", strings.Join(ra, "\n"), strings.Join(rb, "\n"))
	}
}

// TestCancelKey: the lane keys a call as the server keys the requestId of
// a cancellation (the value decoded, printed with %v), whatever the number's
// or string's spelling; an id that is neither is the server's.
func TestCancelKey(t *testing.T) {
	for _, id := range []string{`1`, `-1`, `0`, `123456`, `-123456`, `1234567`, `-1234567`, `100000000`, `999999999999999`, `"abc"`, `""`, `"1"`,
		`1.0`, `-0`, `1e3`, `1234567890123456`, `"\u0041"`} {
		got, ok := cancelKey("s", json.RawMessage(id))
		if !ok {
			t.Errorf("%s: not keyed", id)
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(id), &v); err != nil {
			t.Fatal(err)
		}
		if want := "s:" + fmt.Sprint(v); got != want {
			t.Errorf("%s: key %q, the server's %q", id, got, want)
		}
	}
	for _, id := range []string{`01`, `null`, `{}`, `[1]`, `true`} {
		if k, ok := cancelKey("s", json.RawMessage(id)); ok {
			t.Errorf("%s: keyed %q, want it left to the server", id, k)
		}
	}
}

// TestHTTPFastLaneAnswersBeforeTheOutcomeRecord: on the HTTP fast lane a
// success is answered before its outcome record is written (then often
// together with another call's record), and the record follows.
func TestHTTPFastLaneAnswersBeforeTheOutcomeRecord(t *testing.T) {
	release := make(chan struct{})
	s := newHTTPSideWith(t, true, func(l *ledger.Ledger) State { return slowOutcomes{l, release} })
	answered := make(chan string, 1)
	go func() {
		_, text, _ := s.post(nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`)
		answered <- text
	}()
	select {
	case text := <-answered:
		if !strings.Contains(text, `"text":"hi"`) {
			t.Errorf("answer: %s", text)
		}
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("no answer while the outcome record waits")
	}
	outcomes := func() int {
		b, _ := os.ReadFile(s.audit)
		return strings.Count(string(b), `"type":"outcome"`)
	}
	if n := outcomes(); n != 0 {
		t.Fatalf("%d outcome records before the write was released", n)
	}
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for outcomes() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the outcome record was not written once released")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestHTTPFastLaneLeavesWaitingNotificationsToTheServer: a notification
// queued for a session while none of its requests was running goes out
// with its next answer, as it would without the lane: the lane leaves that
// request to the server, and takes the one after.
func TestHTTPFastLaneLeavesWaitingNotificationsToTheServer(t *testing.T) {
	var s *httpSide
	// mcp-go's forwarder of the session's last request (initialize) may
	// still be running when the notification is queued, and then takes it
	// off the channel and drops it (docs/proxy.md says so): only a
	// notification seen waiting, after that forwarder has had time to end,
	// tests the lane.
	for attempt := 0; ; attempt++ {
		s = newHTTPSide(t, true)
		time.Sleep(20 * time.Millisecond)
		if err := s.p.srv.SendNotificationToSpecificClient(s.sid, "notifications/message", map[string]any{"level": "info", "data": "queued"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		if sess := s.p.registeredSession(s.sid); sess != nil && len(sess.NotificationChannel()) == 1 {
			break
		}
		if attempt == 9 {
			t.Fatal("the queued notification was taken off the session's channel ten times before the call")
		}
	}
	call := func(id int) string {
		_, text, _ := s.post(nil, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`, id))
		return text
	}
	before := s.p.fastTaken.Load()
	if text := call(1); !strings.Contains(text, `"data":"queued"`) || !strings.Contains(text, `"text":"hi"`) {
		t.Fatalf("the answer after a queued notification:\n%s", text)
	}
	if n := s.p.fastTaken.Load() - before; n != 0 {
		t.Fatalf("the fast lane took the request a notification waited for")
	}
	if text := call(2); strings.Contains(text, "queued") || !strings.Contains(text, `"text":"hi"`) {
		t.Fatalf("the next answer:\n%s", text)
	}
	if n := s.p.fastTaken.Load() - before; n != 1 {
		t.Fatalf("the fast lane took %d calls once nothing waited, want 1", n)
	}
}
