//go:build e2e

package e2e

// Tests with real MCP peers from npm (test/peers): the official TypeScript
// SDK client as the agent (test/peers/agent.mjs), the reference servers
// server-everything and server-filesystem as upstreams, and the Inspector
// CLI. `npm ci` in test/peers installs them (.ci/run does).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/planlock/planlock/proxy/ledger"
)

func peersDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../test/peers")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Skip("test/peers/node_modules is missing: run npm ci in test/peers")
	}
	return dir
}

type agentLine struct {
	Step     string            `json:"step"`
	Op       string            `json:"op"`
	OK       bool              `json:"ok"`
	Result   json.RawMessage   `json:"result"`
	Text     string            `json:"text"`
	Progress []json.RawMessage `json:"progress"`
	// Capabilities are the server's, on the connect line.
	Capabilities json.RawMessage `json:"capabilities"`
	Error        *struct {
		Code    *int   `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// runAgent runs the SDK agent with a script and returns its output lines
// by step ("connect" for the connection line).
func runAgent(t *testing.T, env []string, script string, args ...string) map[string]agentLine {
	t.Helper()
	dir := peersDir(t)
	cmd := exec.Command("node", append([]string{filepath.Join(dir, "agent.mjs"), "--script", "-"}, args...)...)
	cmd.Stdin = strings.NewReader(script)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	t.Logf("agent stderr:\n%s", stderr.String())
	if err != nil {
		t.Fatalf("agent: %v\n%s", err, out)
	}
	lines := map[string]agentLine{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var l agentLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("agent output %q: %v", sc.Text(), err)
		}
		key := l.Step
		if key == "" {
			key = l.Op
		}
		lines[key] = l
	}
	if c, ok := lines["connect"]; !ok || !c.OK {
		t.Fatalf("agent did not connect: %s", out)
	}
	return lines
}

func writePlan(t *testing.T, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "plan.hcl")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func wantText(t *testing.T, lines map[string]agentLine, step string, isError bool, substr string) {
	t.Helper()
	l, ok := lines[step]
	if !ok {
		t.Fatalf("no output for step %s", step)
	}
	var r struct {
		IsError bool `json:"isError"`
	}
	_ = json.Unmarshal(l.Result, &r)
	if !l.OK || r.IsError != isError || !strings.Contains(l.Text, substr) {
		t.Fatalf("step %s: ok=%v isError=%v text %q error %+v\nwant isError=%v containing %q", step, l.OK, r.IsError, l.Text, l.Error, isError, substr)
	}
}

const agentRefundScript = `[
 {"op":"listTools"},
 {"op":"callTool","name":"get_order","arguments":{"order_id":"4711"}},
 {"op":"callTool","name":"refund_customer","arguments":{"order_id":"4711","amount":50,"currency":"EUR"}},
 {"op":"callTool","name":"get_script_by_path","arguments":{"path":"x"}},
 {"op":"callTool","name":"refund_customer","arguments":{"order_id":"4711","amount":30,"currency":"EUR"}},
 {"op":"callTool","name":"send_email","arguments":{"to":"customer-4711@example.com","body":"hi"}},
 {"op":"request","method":"resources/list"},
 {"op":"parallel","steps":[
  {"op":"callTool","name":"close_ticket","arguments":{"ticket_id":"T-4711","comment":"a"}},
  {"op":"callTool","name":"close_ticket","arguments":{"ticket_id":"T-4711","comment":"a"}},
  {"op":"callTool","name":"close_ticket","arguments":{"ticket_id":"T-4711","comment":"a"}}
 ]}
]`

func checkRefundAgent(t *testing.T, lines map[string]agentLine, callsLog string) {
	t.Helper()
	var tools struct{ Tools []struct{ Name string } }
	if err := json.Unmarshal(lines["0"].Result, &tools); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "close_ticket,get_order,refund_customer,send_email" {
		t.Fatalf("tools/list: %v", names)
	}
	wantText(t, lines, "1", false, `"order_id":"4711"`)
	wantText(t, lines, "2", true, `blocked by plan "refund-4711": step "refund": argument "amount" = 50 is above the maximum 30`)
	wantText(t, lines, "3", true, `tool "get_script_by_path" is not in plan "refund-4711"`)
	wantText(t, lines, "4", false, `"status":"refunded"`)
	wantText(t, lines, "5", true, `held: step "email" needs a human approval for each call`)
	if l := lines["6"]; l.OK || l.Error == nil || l.Error.Code == nil || *l.Error.Code != -32601 {
		t.Fatalf("resources/list: %+v, want JSON-RPC error -32601", l)
	}
	// Three identical parallel calls against max_calls = 1: one goes through.
	ok := 0
	for _, s := range []string{"7.0", "7.1", "7.2"} {
		var r struct{ IsError bool }
		_ = json.Unmarshal(lines[s].Result, &r)
		if !r.IsError {
			ok++
		}
	}
	if ok != 1 {
		t.Fatalf("%d of 3 parallel close_ticket calls went through, want 1", ok)
	}
	b, err := os.ReadFile(callsLog)
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	for tool, want := range map[string]int{`"get_order"`: 1, `"refund_customer"`: 1, `"get_script_by_path"`: 1, `"send_email"`: 0, `"close_ticket"`: 1} {
		if got := strings.Count(log, `"tool":`+tool); got != want {
			t.Errorf("upstream received %d %s calls, want %d", got, tool, want)
		}
	}
}

func TestSDKAgentStdioProxyStdioRefund(t *testing.T) {
	dir := t.TempDir()
	plan := writePlan(t, anyOrder(refundPlan))
	callsLog := filepath.Join(dir, "calls.jsonl")
	lines := runAgent(t, nil, agentRefundScript, "--",
		planlockBin, "proxy", "--plan", plan, "--insecure-skip-verify", "--state", filepath.Join(dir, "state"),
		"--", refundBin, "--calls-log", callsLog)
	checkRefundAgent(t, lines, callsLog)
	verifyAuditFile(t, filepath.Join(dir, "state", "audit.jsonl"))
}

func verifyAuditFile(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := ledger.Verify(f); err != nil {
		t.Fatalf("audit verify: %v", err)
	}
}

// startLogged starts a command and returns the first match of re in its
// stderr (the address it listens on); the process is killed at cleanup.
func startLogged(t *testing.T, env []string, re string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	found := make(chan string, 1)
	go func() {
		rx := regexp.MustCompile(re)
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			t.Logf("%s: %s", filepath.Base(name), sc.Text())
			if m := rx.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
		if !sent {
			close(found)
		}
	}()
	select {
	case s, ok := <-found:
		if !ok {
			t.Fatalf("%s exited before printing %s", name, re)
		}
		return s
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not print %s", name, re)
	}
	return ""
}

func TestSDKAgentHTTPProxyHTTPRefund(t *testing.T) {
	peersDir(t)
	dir := t.TempDir()
	callsLog := filepath.Join(dir, "calls.jsonl")
	upURL := startLogged(t, nil, `(http://\S+/mcp)`, refundBin, "--http", "127.0.0.1:0", "--calls-log", callsLog)
	plan := writePlan(t, anyOrder(refundPlan))
	const token = "s3cret-token"
	proxyURL := startLogged(t, []string{"PLANLOCK_LISTEN_TOKEN=" + token}, `on (http://\S+/mcp)`,
		planlockBin, "proxy", "--plan", plan, "--insecure-skip-verify", "--state", filepath.Join(dir, "state"),
		"--listen", "127.0.0.1:0", "--upstream-url", upURL)

	// Without the token: 401.
	resp, err := http.Post(proxyURL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without token: HTTP %d, want 401", resp.StatusCode)
	}
	lines := runAgent(t, nil, agentRefundScript, "--url", proxyURL, "--token", token)
	checkRefundAgent(t, lines, callsLog)
}

// everythingPlan allows a few of server-everything's tools.
const everythingPlan = `
plan "everything" {
  goal  = "echo and add"
  order = "any"
  step "echo" {
    tool      = "echo"
    max_calls = 5
    arg "message" { max_length = 20 }
  }
  step "sum" {
    tool = "get-sum"
    arg "a" { max = 10 }
    arg "b" { max = 10 }
  }
  step "env" {
    tool = "get-env"
  }
}
`

func everythingCmd(t *testing.T) []string {
	return []string{"node", filepath.Join(peersDir(t), "node_modules/@modelcontextprotocol/server-everything/dist/index.js"), "stdio"}
}

func TestSDKAgentWithServerEverything(t *testing.T) {
	dir := t.TempDir()
	plan := writePlan(t, everythingPlan)
	direct := runAgent(t, nil, `[{"op":"listTools"}]`, append([]string{"--"}, everythingCmd(t)...)...)
	script := `[
 {"op":"listTools"},
 {"op":"callTool","name":"echo","arguments":{"message":"hello"}},
 {"op":"callTool","name":"echo","arguments":{"message":"a message that is far too long"}},
 {"op":"callTool","name":"get-sum","arguments":{"a":2,"b":3}},
 {"op":"callTool","name":"get-sum","arguments":{"a":2,"b":30}},
 {"op":"callTool","name":"get-env","arguments":{}},
 {"op":"callTool","name":"get-tiny-image","arguments":{}}
]`
	// planlock's own secrets are in the proxy's environment; the upstream
	// must not see them.
	env := []string{"GITHUB_TOKEN=ghp_must_not_leak", "PLANLOCK_LISTEN_TOKEN=listen_must_not_leak", "SIGSTORE_ID_TOKEN=oidc_must_not_leak", "OTHER_SECRET=other_must_not_leak"}
	lines := runAgent(t, env, script, append([]string{"--", planlockBin, "proxy", "--plan", plan, "--insecure-skip-verify",
		"--state", filepath.Join(dir, "state"), "--"}, everythingCmd(t)...)...)

	// Schemas byte for byte ($schema and all), descriptions extended.
	type tool struct {
		Name        string
		Description string
		InputSchema json.RawMessage
	}
	var viaProxy, upstream struct{ Tools []tool }
	_ = json.Unmarshal(lines["0"].Result, &viaProxy)
	_ = json.Unmarshal(direct["0"].Result, &upstream)
	byName := map[string]tool{}
	for _, tl := range upstream.Tools {
		byName[tl.Name] = tl
	}
	if len(viaProxy.Tools) != 3 {
		t.Fatalf("proxy lists %d tools, want 3", len(viaProxy.Tools))
	}
	for _, tl := range viaProxy.Tools {
		up := byName[tl.Name]
		if string(tl.InputSchema) != string(up.InputSchema) {
			t.Errorf("%s: schema changed\n got %s\nwant %s", tl.Name, tl.InputSchema, up.InputSchema)
		}
		if !strings.HasPrefix(tl.Description, up.Description+"\n\n[planlock] ") {
			t.Errorf("%s: description %q", tl.Name, tl.Description)
		}
	}
	wantText(t, lines, "1", false, "hello")
	wantText(t, lines, "2", true, `step "echo": argument "message" has 30 characters, more than the maximum length 20`)
	wantText(t, lines, "3", false, "5")
	wantText(t, lines, "4", true, `step "sum": argument "b" = 30 is above the maximum 10`)
	wantText(t, lines, "5", false, "PATH")
	wantText(t, lines, "6", true, `tool "get-tiny-image" is not in plan "everything"`)
	for _, leak := range []string{"must_not_leak"} {
		if strings.Contains(lines["5"].Text, leak) {
			t.Fatalf("the upstream saw a secret: %s", lines["5"].Text)
		}
	}
}

func TestSDKAgentWithServerFilesystemOverHTTP(t *testing.T) {
	peers := peersDir(t)
	dir := t.TempDir()
	root := filepath.Join(dir, "files")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "notes.txt"), []byte("planlock was here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := writePlan(t, `
plan "files" {
  goal  = "read the notes"
  order = "any"
  step "read" {
    tool = "read_text_file"
    arg "path" { eq = "`+filepath.Join(root, "notes.txt")+`" }
  }
  step "write" {
    tool = "write_file"
    arg "path" { eq = "`+filepath.Join(root, "out.txt")+`" }
    arg "content" { max_length = 5 }
  }
}`)
	proxyURL := startLogged(t, nil, `on (http://\S+/mcp)`,
		planlockBin, "proxy", "--plan", plan, "--insecure-skip-verify", "--state", filepath.Join(dir, "state"),
		"--listen", "127.0.0.1:0", "--", "node", filepath.Join(peers, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"), root)
	script := `[
 {"op":"callTool","name":"read_text_file","arguments":{"path":"` + filepath.Join(root, "notes.txt") + `"}},
 {"op":"callTool","name":"read_text_file","arguments":{"path":"/etc/passwd"}},
 {"op":"callTool","name":"write_file","arguments":{"path":"` + filepath.Join(root, "out.txt") + `","content":"far too long"}},
 {"op":"callTool","name":"list_directory","arguments":{"path":"` + root + `"}}
]`
	lines := runAgent(t, nil, script, "--url", proxyURL)
	wantText(t, lines, "0", false, "planlock was here")
	wantText(t, lines, "1", true, `step "read": argument "path" = "/etc/passwd"`)
	wantText(t, lines, "2", true, `step "write": argument "content" has 12 characters, more than the maximum length 5`)
	wantText(t, lines, "3", true, `tool "list_directory" is not in plan "files"`)
	if _, err := os.Stat(filepath.Join(root, "out.txt")); !os.IsNotExist(err) {
		t.Fatalf("the blocked write reached the filesystem: %v", err)
	}
}

func TestInspectorCLIAsAgent(t *testing.T) {
	peers := peersDir(t)
	dir := t.TempDir()
	plan := writePlan(t, everythingPlan)
	inspector := filepath.Join(peers, "node_modules/@modelcontextprotocol/inspector/cli/build/cli.js")
	base := append([]string{inspector, "--cli", planlockBin, "proxy", "--plan", plan, "--insecure-skip-verify", "--state", filepath.Join(dir, "state"), "--"}, everythingCmd(t)...)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("node", append(append([]string{}, base...), args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("inspector %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := run("--method", "tools/list")
	for _, want := range []string{`"echo"`, `"get-sum"`, `"get-env"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("tools/list lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, `"get-tiny-image"`) {
		t.Fatalf("tools/list shows an unplanned tool:\n%s", out)
	}
	out = run("--method", "tools/call", "--tool-name", "get-sum", "--tool-arg", "a=2", "--tool-arg", "b=40")
	if !strings.Contains(out, `argument \"b\" = 40 is above the maximum 10`) || !strings.Contains(out, `"isError": true`) {
		t.Fatalf("blocked call:\n%s", out)
	}
}

// conformanceToolScenarios are the tool scenarios of the pinned conformance
// suite that pass against server-everything directly.
var conformanceToolScenarios = []string{"tools-list", "tools-call-simple-text", "tools-call-error"}

func runConformance(t *testing.T, url, scenario string) (string, bool) {
	t.Helper()
	cli := filepath.Join(peersDir(t), "node_modules/@modelcontextprotocol/conformance/dist/index.js")
	out, err := exec.Command("node", cli, "server", "--url", url, "--scenario", scenario).CombinedOutput()
	return string(out), err == nil && strings.Contains(string(out), "0 failed")
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

func TestConformanceThroughTheProxyMatchesDirect(t *testing.T) {
	peers := peersDir(t)
	dir := t.TempDir()
	port := freePort(t)
	everything := filepath.Join(peers, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	direct := "http://127.0.0.1:" + port + "/mcp"
	startLogged(t, []string{"PORT=" + port}, `(listening) on port`, "node", everything, "streamableHttp")
	plan := writePlan(t, `
plan "conformance" {
  goal  = "the tools the conformance scenarios call"
  order = "any"
  step "simple" {
    tool      = "test_simple_text"
    max_calls = 100
  }
  step "error" {
    tool      = "test_error_handling"
    max_calls = 100
  }
  step "echo" {
    tool      = "echo"
    max_calls = 100
    arg "message" { any = true }
  }
}`)
	proxied := startLogged(t, nil, `on (http://\S+/mcp)`, planlockBin, "proxy", "--plan", plan, "--insecure-skip-verify",
		"--state", filepath.Join(dir, "state"), "--listen", "127.0.0.1:0", "--upstream-url", direct)
	for _, sc := range conformanceToolScenarios {
		out, ok := runConformance(t, direct, sc)
		if !ok {
			t.Logf("%s fails against server-everything directly; not required through the proxy:\n%s", sc, out)
			continue
		}
		if out, ok := runConformance(t, proxied, sc); !ok {
			// One more run: the suite's own timeouts can miss once on a
			// loaded machine; a second failure is the proxy's.
			t.Logf("%s failed through the proxy once; running it again:\n%s", sc, out)
			if out, ok := runConformance(t, proxied, sc); !ok {
				t.Errorf("%s passes directly but fails through the proxy, twice:\n%s", sc, out)
			}
		}
	}
}

func TestSDKAgentOverHTTPGetsProgressCancellationAndNoHangingSampling(t *testing.T) {
	peersDir(t)
	dir := t.TempDir()
	plan := writePlan(t, testPlan)
	proxyURL := startLogged(t, nil, `on (http://\S+/mcp)`, planlockBin, "proxy", "--plan", plan, "--insecure-skip-verify",
		"--state", filepath.Join(dir, "state"), "--listen", "127.0.0.1:0", "--", testUpstreamBin)
	script := `{"sampling":{"text":"from the agent"},"steps":[
 {"op":"callTool","name":"progress","arguments":{"steps":3},"progress":true},
 {"op":"callTool","name":"progress","arguments":{"steps":2},"progress":true},
 {"op":"callTool","name":"slow","arguments":{"ms":3600000},"cancelAfterMs":300},
 {"op":"callTool","name":"sample","arguments":{"prompt":"hi"}}
]}`
	lines := runAgent(t, nil, script, "--url", proxyURL)
	// Sequential calls: mcp-go v1.2.1 queues an HTTP session's
	// notifications in one channel shared by its concurrent requests, so
	// progress of parallel calls in one session can land on the wrong
	// stream.
	for step, want := range map[string]int{"0": 3, "1": 2} {
		if l := lines[step]; !l.OK || len(l.Progress) != want {
			t.Fatalf("step %s: ok=%v %d progress notifications, want %d: %+v", step, l.OK, len(l.Progress), want, l)
		}
	}
	if l := lines["2"]; l.OK {
		t.Fatalf("the cancelled call succeeded: %+v", l)
	}
	// The upstream's sampling request is refused at once (planlock does
	// not relay it), so the call ends with an error instead of hanging.
	if l := lines["3"]; l.OK && !strings.Contains(string(l.Result), `"isError":true`) {
		t.Fatalf("sample: %+v", l)
	}
	// The cancellation reached the proxy's upstream call.
	for !strings.Contains(readString(filepath.Join(dir, "state", "audit.jsonl")), `"cancelled by the client"`) {
		time.Sleep(20 * time.Millisecond)
	}
}
