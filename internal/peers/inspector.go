package peers

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/planlock/planlock/internal/leakcheck"
)

// Inspector runs the MCP Inspector in CLI mode against target, as
// `npx @modelcontextprotocol/inspector --cli TARGET ARGS...` would from the
// pinned test/peers install (it runs the package's bin with node directly,
// sparing npx's start-up), e.g. Inspector(t, peers.Stdio(bin), "--method", "tools/list").
// It returns the Inspector's stdout (JSON for successful methods); err carries
// the exit status and stderr when it fails.
func Inspector(t testing.TB, target Target, args ...string) (string, error) {
	t.Helper()
	dir := Dir(t)
	cli := []string{filepath.Join(dir, "node_modules/@modelcontextprotocol/inspector/cli/build/cli.js"), "--cli"}
	switch {
	case target.URL != "":
		cli = append(cli, target.URL, "--transport", "http")
		if target.Token != "" {
			cli = append(cli, "--header", "Authorization: Bearer "+target.Token)
		}
	case len(target.Command) > 0:
		cli = append(cli, target.Command...)
	default:
		t.Fatalf("peers: inspector target has neither a URL nor a command")
	}
	cli = append(cli, args...)
	ctx, cancel := context.WithTimeout(context.Background(), agentTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, Node(t), cli...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), target.Env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	leakcheck.OwnGroup(cmd) // as RunAgent: the stdio server goes with it
	err := cmd.Run()
	leakcheck.EndGroup(cmd, groupGrace)
	if err != nil {
		return stdout.String(), fmt.Errorf("inspector %v: %w\nstderr:\n%s", args, err, stderr.String())
	}
	return stdout.String(), nil
}
