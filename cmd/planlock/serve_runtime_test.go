package main

// planlock serve runs each plan on the runtime planlock proxy runs on
// (internal/planrun): hold pull requests, observe mode and the PostgreSQL
// state come with it, under the proxy's flags.

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/planlock/planlock/internal/authn"
	"github.com/planlock/planlock/internal/testkit/githubtest"
	"github.com/planlock/planlock/internal/testkit/peers"
	"github.com/planlock/planlock/internal/testkit/pgtest"
	"github.com/planlock/planlock/internal/testkit/testplans"
)

// echoUpstream is a streamable HTTP MCP server with one tool, echo, that
// answers "echo: <message>".
func echoUpstream(t *testing.T) string {
	t.Helper()
	up := server.NewMCPServer("upstream", "1.0.0")
	up.AddTool(mcp.NewTool("echo", mcp.WithString("message")), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("echo: " + req.GetString("message", "")), nil
	})
	ups := httptest.NewServer(server.NewStreamableHTTPServer(up, server.WithStateLess(true)))
	t.Cleanup(ups.Close)
	return ups.URL + "/mcp"
}

// echoPlan is a plan for echoUpstream; extra goes into its step.
func echoPlan(name, upstream, extra string) string {
	return `plan "` + name + `" {
  goal  = "echo"
  order = "any"
  upstream {
    url = "` + upstream + `"
  }
  step "say" {
    tool = "echo"
    arg "message" { max_length = 10 }
` + extra + `  }
}
`
}

// startServe runs planlock serve with args (plus a token file for token
// "tok" bound to every plan and a loopback listener) until the test ends,
// and returns its base URL and its log.
func startServe(t *testing.T, args ...string) (string, *peers.SyncBuffer) {
	t.Helper()
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(authn.HashToken("tok")+" ops *\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	log := &peers.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	argv := append([]string{"planlock", "serve", "--tokens", tokens, "--listen", "127.0.0.1:0", "--reload-interval", "50ms"}, args...)
	go func() { done <- run(ctx, argv, streams{in: strings.NewReader(""), out: io.Discard, err: log}) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d:\n%s", code, log.String())
		}
	})
	return waitLog(t, log, `at (http://127\.0\.0\.1:\d+)/mcp/<plan>`)[1], log
}

// servedClient is a started MCP client of url with token "tok"; the
// caller closes it.
func servedClient(t *testing.T, ctx context.Context, url string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer tok"}))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	if err := c.Start(ctx); err != nil {
		c.Close()
		t.Fatal(err)
	}
	return c
}

// callServed calls tool on plan through serve as an MCP client with token
// "tok", and returns the result's text and whether it is an error.
func callServed(t *testing.T, base, plan, tool string, args map[string]any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := servedClient(t, ctx, base+"/mcp/"+plan)
	defer c.Close()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "serve-runtime-test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = tool, args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	return strings.Join(text, "\n"), res.IsError
}

// auditTypes counts the records of the audit logs under root by type and
// decision ("observe/would_block").
func auditTypes(t *testing.T, root string) map[string]int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "*", "audit.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no audit log under %s (%v)", root, err)
	}
	n := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var r map[string]any
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			k, _ := r["type"].(string)
			if d, ok := r["decision"].(string); ok {
				k += "/" + d
			}
			n[k]++
		}
	}
	return n
}

// TestServeHoldPullRequest: a held call in serve opens its approval pull
// request on the repository the plans are checked out from, as in proxy.
func TestServeHoldPullRequest(t *testing.T) {
	const token = "ghp_serveHoldSecret0123456789"
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_CONFIG_GLOBAL", filepath.Join(home, ".gitconfig"))
	t.Setenv("GITHUB_TOKEN", token)
	t.Setenv("GH_TOKEN", "")
	root := t.TempDir()
	origin, work := filepath.Join(root, "origin.git"), filepath.Join(root, "work")
	rgit(t, root, "init", "--bare", "-q", "-b", "main", origin)
	rgit(t, root, "clone", "-q", origin, work)
	rgit(t, work, "checkout", "-q", "-b", "main")
	keys := filepath.Join(root, "keys")
	if code, _, e := planlockRun(t, "keygen", "--out-dir", keys, "--name", "ci"); code != 0 {
		t.Fatalf("keygen: %s", e)
	}
	planFile := filepath.Join(work, "plans", "held.hcl")
	if err := os.MkdirAll(filepath.Dir(planFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(planFile, []byte(echoPlan("held", echoUpstream(t), "    approval = \"each\"\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, e := planlockRun(t, "sign", "--key", filepath.Join(keys, "ci.key"), "--tlog-upload=false", planFile); code != 0 {
		t.Fatalf("sign: %s", e)
	}
	rgit(t, work, "add", "-A")
	rgit(t, work, "commit", "-q", "-m", "held plan")
	rgit(t, work, "push", "-q", "origin", "main")
	gh := githubtest.New(t, "acme", "plans", token)

	base, log := startServe(t, "--plans", filepath.Join(work, "plans"), "--key", filepath.Join(keys, "ci.pub"),
		"--state", filepath.Join(root, "state"), "--github-api", gh.URL(), "--github-repo", "acme/plans",
		"--hold-open-wait", "10m", "--hold-status-cache", "0")
	waitLog(t, log, `msg="plan served" plan=held`)
	waitLog(t, log, `holds become approval pull requests on \S*origin\.git \(GitHub pull requests; approvals from planlock/approvals\)" plan=held`)
	text, isErr := callServed(t, base, "held", "echo", map[string]any{"message": "hi"})
	if !isErr || !strings.Contains(text, "pull request "+gh.WebURL()) {
		t.Fatalf("held call answered %v %q, want held with its pull request", isErr, text)
	}
	if n := gh.Count(); n != 1 {
		t.Fatalf("%d pull requests opened, want 1", n)
	}
	if body := gh.Pull(1).Body; !strings.Contains(body, "token:ops") {
		t.Errorf("the pull request does not name the caller:\n%s", body)
	}
	if strings.Contains(log.String(), token) {
		t.Errorf("the GitHub token is in the log")
	}
}

// TestServeObserve: serve --mode observe forwards a call the plan would
// block and audits would_block; --mode enforce (the default) blocks it.
func TestServeObserve(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	up := echoUpstream(t)
	for _, tc := range []struct {
		mode      string
		forwarded bool
		record    string
	}{
		{"observe", true, "observe/would_block"},
		{"enforce", false, "decision/block"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			plans, state := t.TempDir(), t.TempDir()
			if err := os.WriteFile(filepath.Join(plans, "obs.hcl"), []byte(echoPlan("obs", up, "")), 0o644); err != nil {
				t.Fatal(err)
			}
			base, log := startServe(t, "--plans", plans, "--insecure-skip-verify", "--state", state, "--no-hold-prs", "--mode", tc.mode)
			waitLog(t, log, `msg="plan served" plan=obs`)
			if tc.mode == "observe" && !strings.Contains(log.String(), `observe mode: plan \"obs\" is NOT enforced`) {
				t.Errorf("no observe warning in the log:\n%s", log.String())
			}
			text, isErr := callServed(t, base, "obs", "echo", map[string]any{"message": "far longer than ten"})
			if got := !isErr && text == "echo: far longer than ten"; got != tc.forwarded {
				t.Fatalf("--mode %s: answered %v %q, forwarded %v, want %v", tc.mode, isErr, text, got, tc.forwarded)
			}
			if n := auditTypes(t, state); n[tc.record] != 1 {
				t.Fatalf("--mode %s: audit records %v, want one %s", tc.mode, n, tc.record)
			}
		})
	}
}

// TestServeObserveUsage: the observe and hold flags are checked at start
// as in proxy, before any plan is loaded.
func TestServeObserveUsage(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "watch"}, `--mode "watch": give enforce or observe`},
		{[]string{"--mode", "observe", "--observe-step", "say"}, "--mode observe observes every step; --observe-step is for enforce mode"},
		{[]string{"--github-repo", "bad"}, `serve: --github-repo wants OWNER/REPO, not "bad"`},
		{[]string{"--github-api", "http://example.com"}, "serve: --github-api must be an https URL"},
	} {
		args := append([]string{"serve", "--plans", t.TempDir(), "--insecure-skip-verify", "--tokens", "/nonexistent", "--listen", "127.0.0.1:0"}, tc.args...)
		code, _, errs := planlockRun(t, args...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d %q, want 2 and %q", tc.args, code, errs, tc.want)
		}
	}
}

// TestServePostgresState: serve --state postgres://... keeps the counts
// and audit chain of every plan it serves in the one database (audit
// verify reads them back), each plan's apart from the other's, across a
// restart of serve.
func TestServePostgresState(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	url := pgtest.Start(t).NewDatabase(t)
	if code, _, errs := planlockRun(t, "state", "migrate", "--state", url); code != 0 {
		t.Fatalf("migrate: %s", errs)
	}
	up := echoUpstream(t)
	plans := t.TempDir()
	for _, name := range []string{"a", "b"} {
		if err := os.WriteFile(filepath.Join(plans, name+".hcl"), []byte(echoPlan(name, up, "    max_calls = 2\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	serve := func(t *testing.T) string {
		base, log := startServe(t, "--plans", plans, "--insecure-skip-verify", "--state", url, "--no-hold-prs")
		waitLog(t, log, `msg="plan served" plan=a`)
		waitLog(t, log, `msg="plan served" plan=b`)
		return base
	}
	call := func(t *testing.T, base, plan string, n int, want bool) {
		t.Helper()
		text, isErr := callServed(t, base, plan, "echo", map[string]any{"message": "hi"})
		if isErr != want {
			t.Fatalf("plan %s, call %d: error %v %q, want error %v (max_calls = 2 per plan)", plan, n, isErr, text, want)
		}
	}
	t.Run("both-plans", func(t *testing.T) {
		base := serve(t)
		call(t, base, "a", 1, false)
		call(t, base, "a", 2, false)
		call(t, base, "b", 1, false) // a's count is not b's
		call(t, base, "a", 3, true)
		call(t, base, "b", 2, false)
		call(t, base, "b", 3, true)
	})
	t.Run("after-a-restart", func(t *testing.T) {
		base := serve(t)
		call(t, base, "a", 4, true)
		call(t, base, "b", 4, true)
	})
	code, out, errs := planlockRun(t, "audit", "export", "--state", url)
	if code != 0 {
		t.Fatalf("audit export --state: %d %s", code, errs)
	}
	if n := strings.Count(out, `"decision":"allow"`); n != 4 {
		t.Fatalf("the database holds %d allowed calls, want 4 (two per plan):\n%s", n, out)
	}
	if code, out, errs := planlockRun(t, "audit", "verify", "--state", url); code != 0 || !strings.HasPrefix(out, "ok: ") {
		t.Fatalf("audit verify --state: %d %q %q", code, out, errs)
	}
}

// TestServeRelaysTheRequestLogLevel: through serve, a 2026-07-28 client's
// per-request log level reaches a modern upstream (the TypeScript SDK v2
// server, which logs for a request only at or above it), and the client
// gets exactly those messages, as through planlock proxy.
func TestServeRelaysTheRequestLogLevel(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	up := peers.StartModernHTTP(t)
	plans := t.TempDir()
	plan := testplans.WithUpstreamURL(testplans.Logs, up)
	if err := os.WriteFile(filepath.Join(plans, "logs.hcl"), []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	base, log := startServe(t, "--plans", plans, "--insecure-skip-verify", "--no-hold-prs")
	waitLog(t, log, `msg="plan served" plan=logs`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tr, err := transport.NewStreamableHTTP(base+"/mcp/logs", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer tok"}))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	defer c.Close()
	var mu sync.Mutex
	var levels []string
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/message" {
			l, _ := n.Params.AdditionalFields["level"].(string)
			mu.Lock()
			levels = append(levels, l)
			mu.Unlock()
		}
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "serve-log-test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	if v := c.ProtocolVersion(); v != mcp.ProtocolVersion20260728 {
		t.Fatalf("the client speaks %s, want 2026-07-28", v)
	}
	lr := mcp.SetLevelRequest{}
	lr.Params.Level = mcp.LoggingLevelInfo
	//lint:ignore SA1019 the level a client asks for is what is tested
	if err := c.SetLevel(ctx, lr); err != nil {
		t.Fatal(err)
	}
	for _, call := range []struct {
		tool string
		args map[string]any
	}{{"log", map[string]any{}}, {"echo", map[string]any{"message": "x"}}} {
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = call.tool, call.args
		if res, err := c.CallTool(ctx, req); err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", call.tool, err, res)
		}
	}
	mu.Lock()
	got := strings.Join(levels, " ")
	mu.Unlock()
	if got != "info error" {
		t.Fatalf("log messages at %q, want \"info error\" (asked for info)", got)
	}
}

// samplingAgent answers every sampling request with a fixed text.
type samplingAgent struct{ asked atomic.Int32 }

func (a *samplingAgent) CreateMessage(context.Context, mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	a.asked.Add(1)
	return &mcp.CreateMessageResult{SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("from the agent")}, Model: "m"}, nil
}

// TestServeLegacyAskWithPostgresState: through serve with its state in
// PostgreSQL, server-everything's sampling request during a call reaches a
// legacy client when the step's input block allows it, and its answer is
// an input record in the database's journal; one over max_tokens reaches
// no one.
func TestServeLegacyAskWithPostgresState(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	url := pgtest.Start(t).NewDatabase(t)
	if code, _, errs := planlockRun(t, "state", "migrate", "--state", url); code != 0 {
		t.Fatalf("migrate: %s", errs)
	}
	plans := t.TempDir()
	plan := testplans.WithUpstreamCommand(testplans.LegacySampling, peers.EverythingStdio(t))
	if err := os.WriteFile(filepath.Join(plans, "ask.hcl"), []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	base, log := startServe(t, "--plans", plans, "--insecure-skip-verify", "--state", url, "--no-hold-prs")
	waitLog(t, log, `msg="plan served" plan=ask`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A legacy client keeps its session's GET stream, where mcp-go's
	// server sends it a sampling request.
	//lint:ignore SA1019 a legacy client's GET stream is what is wanted
	tr, err := transport.NewStreamableHTTP(base+"/mcp/ask", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer tok"}), transport.WithContinuousListening())
	if err != nil {
		t.Fatal(err)
	}
	agent := &samplingAgent{}
	c := client.NewClient(tr, client.WithSamplingHandler(agent))
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "serve-ask-test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	call := func(maxTokens int) (string, bool) {
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "trigger-sampling-request", map[string]any{"prompt": "hi", "maxTokens": maxTokens}
		res, err := c.CallTool(ctx, req)
		if err != nil {
			t.Fatalf("call: %v", err)
		}
		var text []string
		for _, c := range res.Content {
			if tc, ok := c.(mcp.TextContent); ok {
				text = append(text, tc.Text)
			}
		}
		return strings.Join(text, "\n"), res.IsError
	}
	if text, isErr := call(100); isErr || !strings.Contains(text, "from the agent") || agent.asked.Load() != 1 {
		t.Fatalf("within max_tokens: error %v %q, asked %d times, want the agent's answer once", isErr, text, agent.asked.Load())
	}
	if text, isErr := call(1000); !isErr || !strings.Contains(text, "the upstream asked for input this plan does not allow") || agent.asked.Load() != 1 {
		t.Fatalf("over max_tokens: error %v %q, asked %d times, want the plan's error and no one asked", isErr, text, agent.asked.Load())
	}
	code, out, errs := planlockRun(t, "audit", "export", "--state", url)
	if code != 0 {
		t.Fatalf("audit export --state: %d %s", code, errs)
	}
	if n := strings.Count(out, `"type":"input"`); n != 1 {
		t.Fatalf("the database holds %d input records, want 1:\n%s", n, out)
	}
}

// TestServeJournalFlags: serve takes the proxy's journal flags for each
// plan's state directory: --audit-rotate-size moves a plan's audit log
// aside as a segment that verifies with the log as one chain, and a plan
// whose anchor was lost is refused unless --accept-missing-anchor; with
// --state postgres://... each is a usage error, as for the proxy.
func TestServeJournalFlags(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	up := echoUpstream(t)
	plans, root := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(plans, "a.hcl"), []byte(echoPlan("a", up, "    max_calls = 1000\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	stateDir := func(t *testing.T) string {
		t.Helper()
		logs, _ := filepath.Glob(filepath.Join(root, "*", "audit.jsonl"))
		if len(logs) != 1 {
			t.Fatalf("state directories %v, want one", logs)
		}
		return filepath.Dir(logs[0])
	}
	t.Run("rotate", func(t *testing.T) {
		base, log := startServe(t, "--plans", plans, "--insecure-skip-verify", "--state", root, "--no-hold-prs", "--audit-rotate-size", "64KiB")
		waitLog(t, log, `msg="plan served" plan=a`)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		c := servedClient(t, ctx, base+"/mcp/a")
		defer c.Close()
		if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
			t.Fatal(err)
		}
		// Each call adds an allow and an outcome record; 64 KiB pass
		// within a few hundred.
		for i := 0; i < 400; i++ {
			segs, _ := filepath.Glob(filepath.Join(stateDir(t), "audit.*-*.jsonl"))
			if len(segs) > 0 {
				break
			}
			req := mcp.CallToolRequest{}
			req.Params.Name, req.Params.Arguments = "echo", map[string]any{"message": "hi"}
			if res, err := c.CallTool(ctx, req); err != nil || res.IsError {
				t.Fatalf("call %d: %v %+v", i, err, res)
			}
		}
		segs, _ := filepath.Glob(filepath.Join(stateDir(t), "audit.*-*.jsonl"))
		if len(segs) == 0 {
			t.Fatal("no segment after 400 calls with --audit-rotate-size 64KiB")
		}
		t.Logf("segments %v", segs)
		if code, out, errs := planlockRun(t, "audit", "verify", stateDir(t)); code != 0 {
			t.Fatalf("audit verify of the rotated log: %d %s %s", code, out, errs)
		}
	})
	t.Run("missing-anchor", func(t *testing.T) {
		if err := os.Remove(filepath.Join(stateDir(t), "head")); err != nil {
			t.Fatal(err)
		}
		t.Run("refused", func(t *testing.T) {
			_, log := startServe(t, "--plans", plans, "--insecure-skip-verify", "--state", root, "--no-hold-prs")
			waitLog(t, log, `plan refused: .*anchor.* plan=a`)
		})
		t.Run("accepted", func(t *testing.T) {
			base, log := startServe(t, "--plans", plans, "--insecure-skip-verify", "--state", root, "--no-hold-prs", "--accept-missing-anchor")
			waitLog(t, log, `msg="plan served" plan=a`)
			if text, isErr := callServed(t, base, "a", "echo", map[string]any{"message": "again"}); isErr {
				t.Fatalf("a call after the anchor was accepted: %s", text)
			}
		})
	})
	t.Run("postgres", func(t *testing.T) {
		tokens := filepath.Join(t.TempDir(), "tokens")
		if err := os.WriteFile(tokens, []byte(authn.HashToken("tok")+" ops *\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, flag := range [][]string{{"--accept-missing-anchor"}, {"--audit-rotate-size", "1MiB"}, {"--audit-rotate-every", "1h"}} {
			args := append([]string{"serve", "--plans", plans, "--insecure-skip-verify", "--state", "postgres://planlock@127.0.0.1:1/none",
				"--tokens", tokens, "--listen", "127.0.0.1:0"}, flag...)
			code, _, errs := planlockRun(t, args...)
			if code != 2 || !strings.Contains(errs, flag[0]+" applies to a state directory, not to --state postgres://") {
				t.Errorf("serve %s with a postgres state: exit %d, %q; want a usage error naming the flag", flag[0], code, errs)
			}
		}
	})
}
