//go:build e2e

package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/planlock/planlock/internal/testkit/peers"
	"github.com/planlock/planlock/internal/testkit/testupstream"
)

// These tests prove the harness against the real peers directly, with no
// proxy in between: what passes here is what the proxy must also pass.

func transports(t *testing.T, stdio []string, startHTTP func(t *testing.T) string) []struct {
	name   string
	target func(t *testing.T) peers.Target
} {
	return []struct {
		name   string
		target func(t *testing.T) peers.Target
	}{
		{"stdio", func(t *testing.T) peers.Target { return peers.Stdio(stdio...) }},
		{"http", func(t *testing.T) peers.Target { return peers.HTTP(startHTTP(t), "") }},
	}
}

func mustConnect(t *testing.T, tr peers.Transcript) {
	t.Helper()
	if !tr.Connect.OK {
		t.Fatalf("agent could not connect:\n%s", tr)
	}
}

func TestAgentAgainstServerEverything(t *testing.T) {
	t.Parallel()
	for _, tc := range transports(t, peers.EverythingStdio(t), func(t *testing.T) string { return peers.StartEverythingHTTP(t) }) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := peers.RunAgent(t, tc.target(t), peers.Script{Steps: []peers.Step{
				peers.ListTools(),
				peers.CallTool("echo", map[string]any{"message": "hello planlock"}),
				peers.CallTool("get-sum", map[string]any{"a": 2, "b": 3}),
				peers.CallTool("no_such_tool", map[string]any{}),
				peers.CallTool("get-sum", map[string]any{"a": "two", "b": 3}),
			}})
			mustConnect(t, tr)
			if tools := tr.Step(t, "0").Tools; !slices.Contains(tools, "echo") || !slices.Contains(tools, "get-sum") {
				t.Errorf("tools/list = %v; want echo and get-sum", tools)
			}
			checks := []struct {
				step, text string
				isError    bool
			}{
				{"1", "Echo: hello planlock", false},
				{"2", "The sum of 2 and 3 is 5.", false},
				{"3", "Tool no_such_tool not found", true},
				{"4", "Input validation error", true},
			}
			for _, c := range checks {
				r := tr.Step(t, c.step)
				if !r.OK || r.IsError != c.isError || !strings.Contains(r.Text, c.text) {
					t.Errorf("step %s: ok=%v isError=%v text=%q; want isError=%v containing %q", c.step, r.OK, r.IsError, r.Text, c.isError, c.text)
				}
			}
		})
	}
}

func TestAgentAgainstServerFilesystem(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "note.txt"), []byte("refund approved"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr := peers.RunAgent(t, peers.Stdio(peers.FilesystemStdio(t, dir)...), peers.Script{Steps: []peers.Step{
		peers.ListTools(),
		peers.CallTool("read_text_file", map[string]any{"path": filepath.Join(dir, "note.txt")}),
		peers.CallTool("read_text_file", map[string]any{"path": "/etc/passwd"}),
	}})
	mustConnect(t, tr)
	if tools := tr.Step(t, "0").Tools; !slices.Contains(tools, "read_text_file") || !slices.Contains(tools, "write_file") {
		t.Errorf("tools/list = %v; want read_text_file and write_file", tools)
	}
	if r := tr.Step(t, "1"); r.IsError || r.Text != "refund approved" {
		t.Errorf("read inside the allowed dir: isError=%v %q", r.IsError, r.Text)
	}
	if r := tr.Step(t, "2"); !r.IsError || !strings.Contains(r.Text, "Access denied") {
		t.Errorf("read outside the allowed dir: isError=%v %q; want access denied", r.IsError, r.Text)
	}
}

func TestAgentAgainstRefundServer(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			refund := peers.NewRefund(t, refundBin)
			target := peers.Stdio(refund.Argv()...)
			if transport == "http" {
				target = peers.HTTP(refund.StartHTTP(t), "")
			}
			pin := peers.CallTool("get_script_by_path", map[string]any{"path": "f/support/refund_customer"})
			tr := peers.RunAgent(t, target, peers.Script{Steps: []peers.Step{
				peers.ListTools(),
				peers.CallTool("get_order", map[string]any{"order_id": "4711"}),
				pin,
				peers.CallTool("refund_customer", map[string]any{"order_id": "4711", "amount": 30, "currency": "EUR"}),
			}})
			mustConnect(t, tr)
			want := []string{"close_ticket", "get_order", "get_script_by_path", "refund_customer", "send_email"}
			if got := tr.Step(t, "0").Tools; !slices.Equal(sortedCopy(got), want) {
				t.Errorf("tools = %v; want %v", got, want)
			}
			if r := tr.Step(t, "2"); r.Text != `{"hash":"9f86d081884c7d65","path":"f/support/refund_customer"}` {
				t.Errorf("pin read = %q", r.Text)
			}
			if r := tr.Step(t, "3"); r.IsError || !strings.Contains(r.Text, `"status":"refunded"`) {
				t.Errorf("refund: isError=%v %q", r.IsError, r.Text)
			}
			var tools []string
			for _, c := range refund.Calls(t) {
				tools = append(tools, c.Tool)
			}
			if !slices.Equal(tools, []string{"get_order", "get_script_by_path", "refund_customer"}) {
				t.Errorf("calls log = %v", tools)
			}
			if got := string(refund.Calls(t)[2].Arguments); got != `{"amount":30,"currency":"EUR","order_id":"4711"}` {
				t.Errorf("refund arguments logged as %s", got)
			}

			// A colleague changes the script: the next pin read sees it.
			refund.SetHash(t, "c0ffee0000000000")
			tr = peers.RunAgent(t, target, peers.Script{Steps: []peers.Step{pin}})
			mustConnect(t, tr)
			if r := tr.Step(t, "0"); r.Text != `{"hash":"c0ffee0000000000","path":"f/support/refund_customer"}` {
				t.Errorf("pin read after the change = %q", r.Text)
			}
			if n := len(refund.Calls(t)); n != 4 {
				t.Errorf("calls log has %d records, want 4", n)
			}
		})
	}
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

func TestInspectorListsRefundTools(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			target := peers.Stdio(refundBin)
			if transport == "http" {
				target = peers.HTTP(peers.StartHTTP(t, refundBin), "")
			}
			out, err := peers.Inspector(t, target, "--method", "tools/list")
			if err != nil {
				t.Fatal(err)
			}
			var res struct {
				Tools []struct {
					Name        string          `json:"name"`
					InputSchema json.RawMessage `json:"inputSchema"`
				} `json:"tools"`
			}
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("inspector output is not the tools/list JSON: %v\n%s", err, out)
			}
			var names []string
			for _, tool := range res.Tools {
				names = append(names, tool.Name)
				var schema struct {
					AdditionalProperties *bool `json:"additionalProperties"`
				}
				if err := json.Unmarshal(tool.InputSchema, &schema); err != nil || schema.AdditionalProperties == nil || *schema.AdditionalProperties {
					t.Errorf("%s: schema lost additionalProperties false (%v)", tool.Name, err)
				}
			}
			if want := []string{"close_ticket", "get_order", "get_script_by_path", "refund_customer", "send_email"}; !slices.Equal(sortedCopy(names), want) {
				t.Errorf("tools = %v; want %v", names, want)
			}
		})
	}
}

func TestInspectorReportsUnreachableServer(t *testing.T) {
	t.Parallel()
	_, err := peers.Inspector(t, peers.Stdio(testUpstreamBin, "--mode", "exit-at-start"), "--method", "tools/list")
	if err == nil {
		t.Fatal("inspector against a server that exits at start succeeded")
	}
}

// TestConformanceBaseline runs the conformance suite against each upstream
// directly and checks that exactly the scenarios of
// test/peers/conformance-baseline.json pass. The proxy tests reuse those
// lists: through the proxy, the same must pass.
func TestConformanceBaseline(t *testing.T) {
	t.Parallel()
	bl := peers.Baseline(t)
	tests := []struct {
		name  string
		set   peers.ConformanceSet
		start func(t *testing.T) string
	}{
		{"server-everything", bl.Everything, func(t *testing.T) string { return peers.StartEverythingHTTP(t) }},
		{"testupstream", bl.TestUpstream, func(t *testing.T) string {
			return peers.StartHTTP(t, testUpstreamBin, "--conformance")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url := tt.start(t)
			res := peers.Conformance(t, url)
			// json-schema-2020-12 is outside the suite's default set: run it by name.
			for name, s := range peers.Conformance(t, url, "json-schema-2020-12") {
				res[name] = s
			}
			got := peers.PassingScenarios(res)
			// The suite runs its scenarios back to back with timeouts of its
			// own; on a loaded machine one can miss once. A baseline scenario
			// that failed gets one more run on its own, and only a second
			// failure counts.
			for _, name := range tt.set.Passing {
				if slices.Contains(got, name) || slices.Contains(tt.set.Racy, name) {
					continue
				}
				t.Logf("%s failed in the full run (%s); running it again on its own", name, res[name])
				if again := peers.Conformance(t, url, name); again[name].OK() {
					got = append(got, name)
					slices.Sort(got)
				}
			}
			want := sortedCopy(tt.set.Passing)
			for _, racy := range tt.set.Racy {
				if !slices.Contains(got, racy) {
					t.Logf("racy scenario %s did not pass this time", racy)
					want = slices.DeleteFunc(want, func(s string) bool { return s == racy })
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("scenarios passing directly = %q\nbaseline = %q\n(update test/peers/conformance-baseline.json if the pinned peers changed)", got, tt.set.Passing)
			}
			for _, tool := range append(slices.Clone(tt.set.Tools), tt.set.Vacuous...) {
				if !slices.Contains(tt.set.Passing, tool) {
					t.Errorf("baseline scenario %s is not in the passing list", tool)
				}
			}
			if len(tt.set.Tools) == 0 {
				t.Error("baseline names no tool scenario")
			}
		})
	}
}

func TestConformanceSingleScenario(t *testing.T) {
	t.Parallel()
	url := peers.StartEverythingHTTP(t)
	res := peers.Conformance(t, url, "tools-list", "tools-call-image")
	if len(res) != 2 {
		t.Fatalf("got %d scenarios, want 2", len(res))
	}
	if !res["tools-list"].OK() {
		t.Errorf("tools-list: %s", res["tools-list"])
	}
	// server-everything has no test_image_content tool: a real failure, which
	// shows a failing scenario is reported as such.
	if res["tools-call-image"].OK() {
		t.Errorf("tools-call-image passed against server-everything: %s", res["tools-call-image"])
	}
}

func TestTestUpstreamTools(t *testing.T) {
	t.Parallel()
	up := testUpstreamBin
	for _, tc := range transports(t, []string{up}, func(t *testing.T) string { return peers.StartHTTP(t, up) }) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := peers.RunAgent(t, tc.target(t), peers.Script{
				Sampling:    &peers.SamplingAnswer{Text: "an LLM answer"},
				Elicitation: &peers.ElicitationAnswer{Action: "accept", Content: map[string]any{"answer": "yes"}},
				Steps: []peers.Step{
					peers.CallTool("echo", map[string]any{"message": "ping"}),
					peers.CallTool("progress", map[string]any{"steps": 3}).WithProgress(),
					peers.CallTool("sample", map[string]any{"prompt": "refund?"}),
					peers.CallTool("elicit", map[string]any{"message": "approve?"}),
					peers.CallTool("slow", map[string]any{"ms": 600000}).CancelAfter(100),
					peers.CallTool("flood", nil).CancelAfter(200),
					peers.CallTool("big", map[string]any{"bytes": 100000}),
					peers.Parallel(peers.CallTool("echo", map[string]any{"message": "a"}), peers.CallTool("echo", map[string]any{"message": "b"})),
				},
			})
			mustConnect(t, tr)
			if r := tr.Step(t, "0"); r.Text != "ping" {
				t.Errorf("echo = %q", r.Text)
			}
			if r := tr.Step(t, "1"); len(r.Progress) != 3 || r.Text != "sent 3 progress notifications" {
				t.Errorf("progress: %d notifications, %q", len(r.Progress), r.Text)
			}
			if r := tr.Step(t, "2"); !strings.Contains(r.Text, "an LLM answer") {
				t.Errorf("sample = %q", r.Text)
			}
			if r := tr.Step(t, "3"); r.Text != `elicited: {"action":"accept","content":{"answer":"yes"}}` {
				t.Errorf("elicit = %q", r.Text)
			}
			var methods []string
			for _, sr := range tr.ServerRequests {
				methods = append(methods, sr.Method)
			}
			if !slices.Equal(methods, []string{"sampling/createMessage", "elicitation/create"}) {
				t.Errorf("server requests = %v", methods)
			}
			for _, id := range []string{"4", "5"} {
				if r := tr.Step(t, id); r.OK || !r.Cancelled {
					t.Errorf("step %s: ok=%v cancelled=%v; want a cancelled call", id, r.OK, r.Cancelled)
				}
			}
			if r := tr.Step(t, "5"); r.LogMessages == 0 {
				t.Error("flood: no log notifications arrived before the cancel")
			}
			if r := tr.Step(t, "6"); len(r.Text) != 100000 {
				t.Errorf("big: %d bytes", len(r.Text))
			}
			if a, b := tr.Step(t, "7.0"), tr.Step(t, "7.1"); a.Text != "a" || b.Text != "b" {
				t.Errorf("parallel echoes = %q, %q", a.Text, b.Text)
			}
		})
	}
}

func TestTestUpstreamFaultModes(t *testing.T) {
	t.Parallel()
	up := testUpstreamBin
	echo := peers.CallTool("echo", map[string]any{"message": "hi"}).Timeout(2000)
	tests := []struct {
		mode        testupstream.Mode
		http        bool
		wantConnect bool
		wantErr     string // error message of the first call ("" = the call succeeds)
	}{
		{testupstream.ExitAtStart, false, false, ""},
		{testupstream.Hang, false, false, ""},
		{testupstream.Garbage, false, false, ""},
		{testupstream.ExitMidCall, false, true, "Connection closed"},
		{testupstream.HangCall, false, true, "Request timed out"},
		{testupstream.GarbageCall, false, true, "Request timed out"},
		{testupstream.GarbageStart, false, true, ""},
		{testupstream.Hang, true, false, ""},
		{testupstream.Garbage, true, false, ""},
		{testupstream.ExitMidCall, true, true, "fetch failed"},
		{testupstream.HangCall, true, true, "Request timed out"},
		{testupstream.GarbageCall, true, true, "JSON"},
	}
	for _, tt := range tests {
		name := string(tt.mode) + "/stdio"
		if tt.http {
			name = string(tt.mode) + "/http"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			calls := filepath.Join(t.TempDir(), "calls.jsonl")
			args := []string{"--mode", string(tt.mode), "--calls-log", calls}
			target := peers.Stdio(append([]string{up}, args...)...)
			if tt.http {
				target = peers.HTTP(peers.StartHTTP(t, up, args...), "")
			}
			tr := peers.RunAgent(t, target, peers.Script{ConnectTimeoutMs: 2000, Steps: []peers.Step{echo}})
			if tr.Connect.OK != tt.wantConnect {
				t.Fatalf("connect ok = %v, want %v\n%s", tr.Connect.OK, tt.wantConnect, tr)
			}
			if !tt.wantConnect {
				return
			}
			r := tr.Step(t, "0")
			if tt.wantErr == "" {
				if !r.OK || r.Text != "hi" {
					t.Fatalf("call failed:\n%s", tr)
				}
			} else if r.OK || r.Error == nil || !strings.Contains(r.Error.Message, tt.wantErr) {
				t.Fatalf("call: want an error containing %q\n%s", tt.wantErr, tr)
			}
			if n := len(peers.ReadCalls(t, calls)); n != 1 {
				t.Errorf("upstream received %d calls, want 1", n)
			}
		})
	}
}

// tokenGate fronts url with a reverse proxy that answers 401 unless the
// request carries "Authorization: Bearer <token>", the way a proxy's HTTP
// side with PLANLOCK_LISTEN_TOKEN behaves.
func tokenGate(t *testing.T, url, token string) string {
	t.Helper()
	target, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	path := target.Path
	target.Path = ""
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + path
}

func TestBearerToken(t *testing.T) {
	t.Parallel()
	url := tokenGate(t, peers.StartHTTP(t, testUpstreamBin), "s3cret")
	tests := []struct {
		name, token string
		wantOK      bool
	}{
		{"right token", "s3cret", true},
		{"wrong token", "guess", false},
		{"no token", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr := peers.RunAgent(t, peers.HTTP(url, tt.token), peers.Script{Steps: []peers.Step{peers.CallTool("echo", map[string]any{"message": "hi"})}})
			if tr.Connect.OK != tt.wantOK {
				t.Fatalf("agent connect ok = %v, want %v\n%s", tr.Connect.OK, tt.wantOK, tr)
			}
			if tt.wantOK && tr.Step(t, "0").Text != "hi" {
				t.Errorf("echo through the gate:\n%s", tr)
			}
			_, err := peers.Inspector(t, peers.HTTP(url, tt.token), "--method", "tools/list")
			if (err == nil) != tt.wantOK {
				t.Errorf("inspector error = %v, want ok=%v", err, tt.wantOK)
			}
		})
	}
}
