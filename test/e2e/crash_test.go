//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// proxyProcess is the planlock binary run as an agent runs it, over stdio.
type proxyProcess struct {
	cmd    *exec.Cmd
	client *client.Client
}

func startProxyProcess(t *testing.T, args ...string) *proxyProcess {
	t.Helper()
	pp := &proxyProcess{}
	tr := transport.NewStdioWithOptions(planlockBin, nil, args,
		transport.WithCommandFunc(func(ctx context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
			pp.cmd = exec.Command(command, args...)
			pp.cmd.Env = os.Environ()
			return pp.cmd, nil
		}))
	c := client.NewClient(tr)
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "crash-test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	pp.client = c
	t.Cleanup(func() { c.Close() })
	return pp
}

func (pp *proxyProcess) call(t *testing.T, tool string, args map[string]any) (string, bool) {
	t.Helper()
	return callText(t, pp.client, tool, args)
}

func (pp *proxyProcess) kill9(t *testing.T) {
	t.Helper()
	if err := pp.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	pp.client.Close()
}

const crashPlan = `
plan "crash" {
  goal  = "count across crashes"
  order = "any"
  step "echo" {
    tool      = "echo"
    max_calls = 3
    arg "message" { any = true }
  }
  step "slow" {
    tool = "slow"
    arg "ms" { any = true }
  }
}
`

func TestKill9BetweenAndDuringCallsGrantsNoExtraCall(t *testing.T) {
	dir := t.TempDir()
	plan := writePlan(t, crashPlan)
	callsLog := filepath.Join(dir, "calls.jsonl")
	args := []string{"proxy", "--plan", plan, "--insecure-skip-verify", "--state", filepath.Join(dir, "state"),
		"--", testUpstreamBin, "--calls-log", callsLog}
	echo := map[string]any{"message": "hi"}

	// Between calls: two calls, kill -9, restart, one more allowed.
	pp := startProxyProcess(t, args...)
	for i := 0; i < 2; i++ {
		if text, isErr := pp.call(t, "echo", echo); isErr {
			t.Fatalf("echo %d: %s", i, text)
		}
	}
	pp.kill9(t)
	pp = startProxyProcess(t, args...)
	if text, isErr := pp.call(t, "echo", echo); isErr {
		t.Fatalf("third echo: %s", text)
	}
	if text, isErr := pp.call(t, "echo", echo); !isErr || !strings.Contains(text, `step "echo": max_calls 3 used up (3 calls forwarded)`) {
		t.Fatalf("fourth echo after restart: %v %q", isErr, text)
	}

	// During a call: the proxy dies while the upstream works on it.
	done := make(chan struct{})
	go func() {
		defer close(done)
		req := mcp.CallToolRequest{}
		req.Params.Name = "slow"
		req.Params.Arguments = map[string]any{"ms": 600000}
		_, _ = pp.client.CallTool(context.Background(), req)
	}()
	for !strings.Contains(readString(callsLog), `"slow"`) {
		time.Sleep(10 * time.Millisecond)
	}
	pp.kill9(t)
	<-done
	pp = startProxyProcess(t, args...)
	if text, isErr := pp.call(t, "slow", map[string]any{"ms": 1}); !isErr || !strings.Contains(text, `step "slow": max_calls 1 used up (1 calls forwarded)`) {
		t.Fatalf("slow after a crash during the call: %v %q", isErr, text)
	}
	pp.client.Close()

	log := readString(callsLog)
	if n := strings.Count(log, `"tool":"echo"`); n != 3 {
		t.Errorf("upstream received %d echo calls, want 3", n)
	}
	if n := strings.Count(log, `"tool":"slow"`); n != 1 {
		t.Errorf("upstream received %d slow calls, want 1", n)
	}
	verifyAuditFile(t, filepath.Join(dir, "state", "audit.jsonl"))
}

func readString(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
