//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/internal/testkit/peers"
	"github.com/planlock/planlock/internal/testkit/testplans"
)

// servedProcess is a running `planlock serve` with one bearer token.
type servedProcess struct {
	cmd    *exec.Cmd
	base   string // http://host:port
	token  string
	stderr *peers.SyncBuffer
}

// startServe runs planlock serve on the plan files in plans (name → HCL),
// its state in state, with a token that may use every plan, and extra
// flags.
func startServe(t *testing.T, state string, plans map[string]string, extra ...string) *servedProcess {
	t.Helper()
	return startServeIn(t, t.TempDir(), state, plans, extra...)
}

// startServeIn is startServe with the plan files and token file in dir:
// serve started again on the same dir serves the same signed paths.
func startServeIn(t *testing.T, dir, state string, plans map[string]string, extra ...string) *servedProcess {
	t.Helper()
	pdir := filepath.Join(dir, "plans")
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	var names []string
	for name, hcl := range plans {
		names = append(names, name)
		if err := os.WriteFile(filepath.Join(pdir, name+".hcl"), []byte(hcl), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sp := &servedProcess{token: "serve-test-token", stderr: &peers.SyncBuffer{}}
	sum := sha256.Sum256([]byte(sp.token))
	tokens := filepath.Join(dir, "tokens.txt")
	if err := os.WriteFile(tokens, []byte("sha256:"+hex.EncodeToString(sum[:])+" ci "+strings.Join(names, ",")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sp.cmd = exec.Command(planlockBin, append([]string{"serve", "--insecure-skip-verify", "--plans", pdir, "--state", state,
		"--tokens", tokens, "--listen", "127.0.0.1:0"}, extra...)...)
	sp.cmd.Env = os.Environ()
	sp.cmd.Stderr = sp.stderr
	if err := sp.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sp.cmd.Process.Kill(); _ = sp.cmd.Wait() })
	rx := regexp.MustCompile(`serving plans of .* at (http://[0-9.:]+)/mcp/<plan>`)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if m := rx.FindStringSubmatch(sp.stderr.String()); m != nil {
			sp.base = m[1]
			return sp
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve is not serving:\n%s", sp.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// client connects an SDK client to plan's endpoint.
func (sp *servedProcess) client(t *testing.T, plan string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(sp.base+"/mcp/"+plan,
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + sp.token}))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "serve-test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize: %v\n%s", err, sp.stderr.String())
	}
	return c
}

// readyz reads /readyz: its status and body.
func (sp *servedProcess) readyz(t *testing.T) (int, map[string]any) {
	t.Helper()
	res, err := http.Get(sp.base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatalf("/readyz body: %v", err)
	}
	return res.StatusCode, body
}

// stop signals serve and waits for it to exit by itself.
func (sp *servedProcess) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	_ = sp.cmd.Process.Signal(sig)
	waited := make(chan error, 1)
	go func() { waited <- sp.cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("serve exited with %v:\n%s", err, sp.stderr.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("serve did not exit:\n%s", sp.stderr.String())
	}
}

func callText(t *testing.T, c *client.Client, tool string, args map[string]any) (string, bool) {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// serve ends the upstream of every plan it served when it shuts down, even
// an upstream that ignores its stdin's end and SIGTERM, child included: the
// upstreams start on a plan's first request and must not outlive serve.
func TestServeEndsItsUpstreamsOnShutdown(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			up, pids := deafUpstream(t)
			sp := startServe(t, filepath.Join(t.TempDir(), "state"), map[string]string{"faults": testplans.WithUpstreamCommand(faultsPlan, up)})
			// The first request starts the plan's upstream.
			body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
			req, _ := http.NewRequest("POST", sp.base+"/mcp/faults", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Authorization", "Bearer "+sp.token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("initialize: %s\n%s", resp.Status, sp.stderr.String())
			}
			ps := pids()
			t.Cleanup(func() {
				for _, p := range ps {
					_ = syscall.Kill(p, syscall.SIGKILL)
				}
			})
			sp.stop(t, sig)
			for _, p := range ps {
				if !gone(p) {
					t.Fatalf("upstream process %d outlived serve (pids %v)\n%s", p, ps, sp.stderr.String())
				}
			}
		})
	}
}

// A full disk under serve: calls are refused while they cannot be
// recorded, /readyz answers 503 and the log names the plan and the state
// fault once; when space returns, /readyz is 200 again and calls are served,
// with nothing lost and nothing forwarded uncounted.
func TestServeReadyzFollowsADiskFault(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small file system (CI runs as root)")
	}
	root := t.TempDir()
	mnt := filepath.Join(root, "fs")
	mountTmpfs(t, mnt, "1m")
	filler := filepath.Join(mnt, "filler")
	callsLog := filepath.Join(root, "calls.jsonl") // not on the faulty disk
	sp := startServe(t, filepath.Join(mnt, "state"), map[string]string{
		"diskfault": testplans.WithUpstreamCommand(diskFaultPlan, []string{testUpstreamBin, "--calls-log", callsLog})})
	c := sp.client(t, "diskfault")
	echo := map[string]any{"message": "hi"}
	granted := 0
	for range 2 {
		if text, isErr := callText(t, c, "echo", echo); isErr {
			t.Fatalf("before the fault: %s", text)
		}
		granted++
	}
	if code, body := sp.readyz(t); code != 200 || body["ready"] != true {
		t.Fatalf("/readyz before the fault: %d %v\n%s", code, body, sp.stderr.String())
	}
	fill(t, filler)
	var refusal string
	for range 100 {
		text, isErr := callText(t, c, "echo", echo)
		if isErr {
			refusal = text
			break
		}
		granted++
	}
	if !strings.Contains(refusal, "not forwarded") {
		t.Fatalf("no call was refused on a full disk (last answer %q)", refusal)
	}
	if strings.Contains(refusal, root) {
		t.Fatalf("the refusal shows the agent a local path: %q", refusal)
	}
	code, body := sp.readyz(t)
	if code != 503 || body["ready"] != false || body["not_ready"] != float64(1) {
		t.Fatalf("/readyz during the fault: %d %v", code, body)
	}
	if b, _ := json.Marshal(body); strings.Contains(string(b), root) {
		t.Fatalf("/readyz, unauthenticated, shows a local path: %s", b)
	}
	sp.readyz(t) // a second look logs nothing new
	if n := strings.Count(sp.stderr.String(), "not ready: plan diskfault"); n != 1 {
		t.Fatalf("the log reports the plan not ready %d times, want once:\n%s", n, sp.stderr.String())
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute) // the ledger retries every second
	for {
		code, _ := sp.readyz(t)
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never came back once the disk had space:\n%s", sp.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	for range 3 {
		if text, isErr := callText(t, c, "echo", echo); isErr {
			t.Fatalf("after the fault cleared: %s\n%s", text, sp.stderr.String())
		}
		granted++
	}
	if got := strings.Count(readString(callsLog), `"tool":"echo"`); got != granted {
		t.Fatalf("the upstream received %d calls, %d were granted", got, granted)
	}
	sp.stop(t, syscall.SIGTERM)
	journals, _ := filepath.Glob(filepath.Join(mnt, "state", "*", "audit.jsonl"))
	if len(journals) != 1 {
		t.Fatalf("journals: %v", journals)
	}
	if out, err := exec.Command(planlockBin, "audit", "verify", journals[0]).CombinedOutput(); err != nil {
		t.Fatalf("audit verify after the fault: %v\n%s", err, out)
	}
	if allows := strings.Count(readString(journals[0]), `"decision":"allow"`); allows < granted {
		t.Fatalf("%d allow records for %d calls the upstream received", allows, granted)
	}
}

// serve with a state key: every record carries a MAC that audit verify
// checks with the key; started again without the key, serve refuses the
// plan (a key once used cannot be dropped) and says why; with the key it
// serves it again with its counts.
func TestServeWithAStateKey(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "state.key")
	if out, err := exec.Command(planlockBin, "keygen", "--state-key", key).CombinedOutput(); err != nil {
		t.Fatalf("keygen --state-key: %v\n%s", err, out)
	}
	state := filepath.Join(dir, "state")
	callsLog := filepath.Join(dir, "calls.jsonl")
	plans := map[string]string{"echo": testplans.WithUpstreamCommand(strings.Replace(inspector2Plan, "max_calls = 2", "max_calls = 3", 1),
		[]string{testUpstreamBin, "--calls-log", callsLog})}
	echo := map[string]any{"message": "hi"}

	served := filepath.Join(dir, "served")
	sp := startServeIn(t, served, state, plans, "--state-key", key)
	if text, isErr := callText(t, sp.client(t, "echo"), "echo", echo); isErr {
		t.Fatalf("with the key: %s", text)
	}
	sp.stop(t, syscall.SIGTERM)
	journals, _ := filepath.Glob(filepath.Join(state, "*", "audit.jsonl"))
	if len(journals) != 1 {
		t.Fatalf("journals: %v", journals)
	}
	j := readString(journals[0])
	if n, macs := strings.Count(j, "\n"), strings.Count(j, `"mac":"`); n < 3 || macs != n {
		t.Fatalf("%d records, %d with a MAC:\n%s", n, macs, j)
	}
	if out, err := exec.Command(planlockBin, "audit", "verify", "--state-key", key, journals[0]).CombinedOutput(); err != nil {
		t.Fatalf("audit verify --state-key: %v\n%s", err, out)
	}

	sp = startServeIn(t, served, state, plans)
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(sp.stderr.String(), "no state key is given") {
		if time.Now().After(deadline) {
			t.Fatalf("serve without the key did not say why it refuses the plan:\n%s", sp.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, _ := sp.readyz(t); code != 503 {
		t.Fatalf("/readyz without the key: %d, want 503", code)
	}
	sp.stop(t, syscall.SIGTERM)

	sp = startServeIn(t, served, state, plans, "--state-key", key)
	c := sp.client(t, "echo")
	for i := 2; i <= 3; i++ {
		if text, isErr := callText(t, c, "echo", echo); isErr {
			t.Fatalf("call %d with the key again: %s", i, text)
		}
	}
	if text, isErr := callText(t, c, "echo", echo); !isErr || !strings.Contains(text, "max_calls 3 used up") {
		t.Fatalf("the fourth call: %v %q, want it blocked: the count carried over", isErr, text)
	}
	if got := strings.Count(readString(callsLog), `"tool":"echo"`); got != 3 {
		t.Fatalf("the upstream received %d calls, want 3", got)
	}
}

// serve starts a plan's upstream named by a relative path (./bin/up)
// beside the plan file, not in serve's working directory.
func TestServeUpstreamBesideThePlan(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "plans", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\nexec " + strconv.Quote(testUpstreamBin) + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "up"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	sp := startServeIn(t, dir, filepath.Join(t.TempDir(), "state"), map[string]string{"faults": testplans.WithUpstreamCommand(faultsPlan, []string{"./bin/up"})})
	text, isErr := callText(t, sp.client(t, "faults"), "echo", map[string]any{"message": "beside"})
	if isErr || !strings.Contains(text, "beside") {
		t.Fatalf("echo through a plan whose upstream is ./bin/up: %q (error %v)\n%s", text, isErr, sp.stderr.String())
	}
}
