//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// The real planlock binary serving a key-signed plan (keys made by openssl)
// in front of the refund server, and reloading it when the files change.

const livePlanV1 = `
plan "live" {
  goal  = "look up order 4711 once"
  order = "any"
  step "lookup" {
    tool      = "get_order"
    max_calls = 1
    arg "order_id" { eq = "4711" }
  }
}`

const livePlanV2 = `
plan "live" {
  goal  = "look up order 4711 three times, close the ticket"
  order = "any"
  step "lookup" {
    tool      = "get_order"
    max_calls = 3
    arg "order_id" { eq = "4711" }
  }
  step "close" {
    tool = "close_ticket"
    arg "ticket_id" { eq = "T-4711" }
    arg "comment"   { any = true }
  }
}`

// opensslKeyPair writes an ECDSA P-256 key pair with openssl and returns the
// private key PEM and the public key file.
func opensslKeyPair(t *testing.T, dir string) ([]byte, string) {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	priv, pub := filepath.Join(dir, "release.key"), filepath.Join(dir, "release.pub")
	for _, args := range [][]string{
		{"genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", priv},
		{"pkey", "-in", priv, "-pubout", "-out", pub},
	} {
		if out, err := exec.Command("openssl", args...).CombinedOutput(); err != nil {
			t.Fatalf("openssl %v: %v\n%s", args, err, out)
		}
	}
	pem, err := os.ReadFile(priv)
	if err != nil {
		t.Fatal(err)
	}
	return pem, pub
}

// liveProxy is `planlock proxy` as a child process with an mcp-go client on
// its stdio and its stderr read line by line.
type liveProxy struct {
	t      *testing.T
	ctx    context.Context
	client *client.Client
	stderr chan string
}

func startLiveProxy(t *testing.T, args ...string) *liveProxy {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, planlockBin, append([]string{"proxy"}, args...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lp := &liveProxy{t: t, ctx: ctx, stderr: make(chan string, 256)}
	go func() {
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			t.Log("proxy stderr: " + sc.Text())
			select {
			case lp.stderr <- sc.Text():
			default:
			}
		}
	}()
	c := client.NewClient(transport.NewIO(stdout, stdin, io.NopCloser(strings.NewReader(""))))
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	lp.client = c
	t.Cleanup(func() {
		stdin.Close() // the agent goes away: the proxy exits
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cancel()
			<-done
		}
		cancel()
	})
	return lp
}

func (lp *liveProxy) call(tool, args string) (string, bool) {
	lp.t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = json.RawMessage(args)
	res, err := lp.client.CallTool(lp.ctx, req)
	if err != nil {
		lp.t.Fatalf("call %s: %v", tool, err)
	}
	var texts []string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	return strings.Join(texts, "\n"), res.IsError
}

// waitLog returns the first stderr line containing want. Lines saying a
// change was not loaded may come first: the test replaces the plan and
// its bundle one after the other.
func (lp *liveProxy) waitLog(want string) string {
	lp.t.Helper()
	deadline := time.After(60 * time.Second) // a bound on waiting, not a timing assertion
	for {
		select {
		case line := <-lp.stderr:
			if strings.Contains(line, want) {
				return line
			}
		case <-deadline:
			lp.t.Fatalf("no stderr line containing %q", want)
		}
	}
}

func (lp *liveProxy) tools() string {
	lp.t.Helper()
	res, err := lp.client.ListTools(lp.ctx, mcp.ListToolsRequest{})
	if err != nil {
		lp.t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return strings.Join(names, ",")
}

func TestSignedPlanServesAndReloadsOnChange(t *testing.T) {
	dir := t.TempDir()
	priv, pub := opensslKeyPair(t, dir)
	t1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	file := signPlan(t, dir, "live.hcl", livePlanV1, t1, priv)
	callsLog, hashFile := filepath.Join(dir, "calls.jsonl"), filepath.Join(dir, "hash")
	if err := os.WriteFile(hashFile, []byte(goodHash+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lp := startLiveProxy(t, "--plan", file, "--path", "plans/live.hcl", "--key", pub, "--state", filepath.Join(dir, "state"),
		"--reload-interval", "20ms", "--", refundBin, "--calls-log", callsLog, "--hash-file", hashFile)
	lp.waitLog("planlock: plan " + file + " verified: signed by key sha256:")
	upstream := func() map[string]int { return upstreamCalls(t, callsLog) }

	// v1: one lookup.
	if text, isErr := lp.call("get_order", `{"order_id":"4711"}`); isErr {
		t.Fatalf("v1 lookup: %s", text)
	}
	if text, _ := lp.call("get_order", `{"order_id":"4711"}`); !strings.Contains(text, `step "lookup": max_calls 1 used up`) {
		t.Fatalf("v1 second lookup: %s", text)
	}
	if got := lp.tools(); got != "get_order" {
		t.Fatalf("v1 tools: %s", got)
	}

	// A newly signed v2 replaces it: new tools, new limits, new counts.
	signPlan(t, dir, "live.hcl", livePlanV2, t1.Add(time.Hour), priv)
	lp.waitLog("planlock: reloaded " + file + `: now serving plan "live"`)
	if got := lp.tools(); got != "close_ticket,get_order" {
		t.Fatalf("v2 tools: %s", got)
	}
	if text, isErr := lp.call("get_order", `{"order_id":"4711"}`); isErr {
		t.Fatalf("v2 lookup 1: %s", text)
	}

	// A tampered plan (v2 with max_calls 9, the bundle of v2) is not loaded:
	// v2 keeps serving, with its limit of 3.
	tampered := strings.Replace(livePlanV2, "max_calls = 3", "max_calls = 9", 1)
	if err := os.WriteFile(file, []byte(tampered), 0o644); err != nil {
		t.Fatal(err)
	}
	line := lp.waitLog("digest mismatch")
	if !strings.HasPrefix(line, "planlock: "+file+` changed on disk but was NOT loaded; still serving plan "live"`) {
		t.Fatalf("log: %q", line)
	}
	for i, want := range []string{`"order_id":"4711"`, `"order_id":"4711"`, `step "lookup": max_calls 3 used up`} {
		if text, _ := lp.call("get_order", `{"order_id":"4711"}`); !strings.Contains(text, want) {
			t.Fatalf("after the tampered plan, lookup %d: %s (want %q)", i+2, text, want)
		}
	}

	// Putting the older v1 back (validly signed) is a downgrade.
	signPlan(t, dir, "live.hcl", livePlanV1, t1, priv)
	lp.waitLog(`plan "live" signed at 2026-11-01T00:00:00Z is not newer than the plan being served (signed at 2026-11-01T01:00:00Z); refusing to replace it`)
	if text, isErr := lp.call("close_ticket", `{"ticket_id":"T-4711","comment":"done"}`); isErr {
		t.Fatalf("v2 still serves close_ticket: %s", text)
	}
	if got := upstream(); got["get_order"] != 4 || got["close_ticket"] != 1 {
		t.Fatalf("upstream received %v, want 4 get_order (1 under v1, 3 under v2) and 1 close_ticket", got)
	}
}
