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

	"github.com/planlock/planlock/internal/testkit/leakcheck"
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

// Inspector2 runs the Inspector 2.12 CLI (the inspector-2 alias of the
// pinned install) against target, negotiating era ("legacy", "auto" or
// "modern", its --protocol-era), with --format json -q: stdout is one JSON
// object, {"result": …} or {"error": …}. args are the CLI's options (e.g.
// "--method", "tools/list"); a stdio target's command goes after "--", so
// that no option swallows it. HOME is a temporary directory: the Inspector
// keeps a catalog and secrets there.
func Inspector2(t testing.TB, target Target, era string, args ...string) (string, error) {
	t.Helper()
	dir := Dir(t)
	cli := append([]string{filepath.Join(dir, "node_modules/inspector-2/clients/cli/build/index.js"),
		"--protocol-era", era, "--format", "json", "-q"}, args...)
	switch {
	case target.URL != "":
		if target.Token != "" {
			cli = append(cli, "--header", "Authorization: Bearer "+target.Token)
		}
		cli = append(cli, "--transport", "http", "--server-url", target.URL)
	case len(target.Command) > 0:
		cli = append(append(cli, "--"), target.Command...)
	default:
		t.Fatalf("peers: inspector target has neither a URL nor a command")
	}
	ctx, cancel := context.WithTimeout(context.Background(), agentTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, Node(t), cli...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "HOME="+t.TempDir()), target.Env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	leakcheck.OwnGroup(cmd)
	err := cmd.Run()
	leakcheck.EndGroup(cmd, groupGrace)
	if err != nil {
		return stdout.String(), fmt.Errorf("inspector 2 %v: %w\nstdout:\n%s\nstderr:\n%s", args, err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}
