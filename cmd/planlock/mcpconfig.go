package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/boundedio"
	"github.com/planlock/planlock/internal/catalog"
)

func mcpConfigCommand() *cli.Command {
	return &cli.Command{
		Name:      "mcp-config",
		Usage:     "print (or write) the MCP client configuration that runs an upstream behind planlock",
		ArgsUsage: "[-- UPSTREAM_COMMAND ARGS...]",
		Description: `The upstream is the plan's upstream block when it has one (the signed plan
decides it; giving the same command after -- is accepted with a note, another
one is refused), else the command after --.

Prints the server entry in the shape the --client expects:

  claude-desktop, cursor, windsurf  {"mcpServers": {NAME: {"command": ..., "args": [...]}}}
  vscode (.vscode/mcp.json)         {"servers": {NAME: {"type": "stdio", "command": ..., "args": [...]}}}
  claude-code                       claude mcp add-json NAME '{"type":"stdio","command":...,"args":[...]}'

Without --client: the "mcpServers" form. With --listen ADDR the entry is the
HTTP form (the URL http://ADDR/mcp; claude-desktop has none) and the proxy
command to run is printed on stderr.

--write merges the entry into the client's configuration file (--file, or
its usual place: claude-desktop its claude_desktop_config.json, claude-code
.mcp.json, cursor ~/.cursor/mcp.json, vscode .vscode/mcp.json, windsurf
~/.codeium/windsurf/mcp_config.json): only the entry's bytes change, every
other entry stays byte for byte, and the old file is kept as FILE.bak.

Paths are made absolute, since clients start servers from another
directory. The trust flags (as for planlock proxy) are passed on, so that
the proxy the client starts verifies the plan; settings from the operator
config file are not copied, since the proxy reads the same file. Each plan
gets its own state directory, so entries of different plans need no --state.

Examples:
   planlock mcp-config --client claude-code --plan plans/read-docs.hcl --key plan-signing.pub
   planlock mcp-config --client vscode --write --plan plans/read-docs.hcl
   planlock mcp-config --client cursor --listen 127.0.0.1:3001 --plan plans/read-docs.hcl`,
		Flags: append(append([]cli.Flag{
			&cli.StringFlag{Name: "plan", Usage: "plan `FILE`", Required: true},
			&cli.StringFlag{Name: "name", Usage: "server `NAME` in the client (default: the plan's name)"},
			&cli.StringFlag{Name: "client", Usage: "print the shape of `CLIENT`: " + clientNames()},
			&cli.BoolFlag{Name: "write", Usage: "merge the entry into the client's configuration file (a .bak copy is kept)"},
			&cli.StringFlag{Name: "file", Usage: "the client configuration `FILE` --write merges into", TakesFile: true},
			&cli.StringFlag{Name: "listen", Usage: "the HTTP form: the proxy serves streamable HTTP on `ADDR` (the URL is http://ADDR/mcp)"},
			&cli.StringFlag{Name: "planlock", Usage: "the planlock `COMMAND` the client runs (default: this executable)"},
			&cli.BoolFlag{Name: "insecure-skip-verify", Usage: "pass --insecure-skip-verify to the proxy (unsafe)"},
			&cli.StringFlag{Name: "bundle", Usage: "the plan's bundle `FILE`, passed to the proxy", TakesFile: true},
			&cli.StringFlag{Name: "path", Usage: "the plan's `PATH` in the repository, passed to the proxy (default: relative to the Git checkout)"},
		}, stateFlags()...), trustFlags()...),
		Action: runMCPConfig,
	}
}

func runMCPConfig(c *cli.Context) error {
	errw := func(s string) { fmt.Fprintln(c.App.ErrWriter, s) }
	client, ok := mcpClients[c.String("client")]
	if !ok && c.String("client") != "" {
		return usageErrorf("mcp-config: unknown --client %q (one of %s)", c.String("client"), clientNames())
	}
	if c.Bool("write") && !ok {
		return usageErrorf("mcp-config: --write needs --client")
	}
	if c.String("file") != "" && !c.Bool("write") {
		return usageErrorf("mcp-config: --file goes with --write")
	}
	if c.String("listen") != "" && !ok {
		return usageErrorf("mcp-config: --listen needs --client (the HTTP form differs per client)")
	}
	if c.String("listen") != "" && client.http == nil {
		return usageErrorf("mcp-config: %s starts stdio servers only; drop --listen", client.name)
	}
	planPath, err := filepath.Abs(c.String("plan"))
	if err != nil {
		return failf("%v", err)
	}
	src, err := boundedio.ReadFile(planPath, boundedio.MaxPlanBytes)
	if err != nil {
		return failf("read plan: %v", err)
	}
	plan, diags := hclplan.Parse(planPath, src)
	if diags.HasErrors() {
		return failf("plan %s is not valid: %s", planPath, oneLineDiags(diags.Error()))
	}
	upstream := c.Args().Slice()
	if plan.Upstream != nil && len(upstream) > 0 {
		// The plan's upstream is part of what was approved and signed:
		// the command line never overrides it. Repeating it is harmless.
		if !slices.Equal(plan.Upstream.Command, upstream) {
			return usageErrorf("the plan's upstream block names %s; -- gives %s: the signed plan decides the upstream, so drop -- COMMAND (or change the plan's upstream and approve it again)",
				upstreamWords(plan.Upstream), strings.Join(upstream, " "))
		}
		fmt.Fprintln(c.App.ErrWriter, "planlock: note: the plan's upstream block already names this upstream; -- COMMAND is not needed")
		upstream = nil
	}
	if plan.Upstream == nil && len(upstream) == 0 {
		return usageErrorf("no upstream: give -- COMMAND ARGS... or an upstream block in the plan")
	}
	self := c.String("planlock")
	if self == "" {
		if self, err = os.Executable(); err != nil {
			return failf("find the planlock executable: %v", err)
		}
		if inGoBuildCache(self) {
			errw(fmt.Sprintf("planlock: WARNING: %s is a temporary build of go run or go test, gone when it ends; install planlock (go install github.com/planlock/planlock/cmd/planlock@latest) and run mcp-config with that binary, or give --planlock", self))
		}
	}
	var extra []string
	switch {
	case c.Bool("insecure-skip-verify") && trustGiven(c) != "":
		return usageErrorf("give either --insecure-skip-verify or the trust flags, not both")
	case c.Bool("insecure-skip-verify"):
		extra = append(extra, "--insecure-skip-verify")
	case trustGiven(c) == "":
		return usageErrorf("%s", noTrustPolicy)
	default:
		args, err := trustArgs(c, c.String("plan"))
		if err != nil {
			return err
		}
		extra = append(extra, args...)
	}
	for _, f := range []string{"state", "state-root"} {
		if d := c.String(f); d != "" && !fromConfig(c, f) {
			abs, err := filepath.Abs(d)
			if err != nil {
				return failf("%v", err)
			}
			extra = append(extra, "--"+f, abs)
		}
	}
	name := c.String("name")
	if name == "" {
		name = plan.Name
	}
	if !ok { // the generic form, as before --client
		out, err := catalog.MCPConfig(name, self, planPath, extra, upstream)
		if err != nil {
			return failf("%v", err)
		}
		_, err = c.App.Writer.Write(out)
		return err
	}

	args := append([]string{"proxy", "--plan", planPath}, extra...)
	var entry serverEntry
	if addr := c.String("listen"); addr != "" {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return usageErrorf("--listen %q: %v", addr, err)
		}
		if host == "" {
			host = "127.0.0.1"
		}
		hostport := net.JoinHostPort(host, port)
		entry = client.http("http://" + hostport + "/mcp")
		run := append(append([]string{self}, args...), "--listen", hostport)
		if len(upstream) > 0 {
			run = append(append(run, "--"), upstream...)
		}
		errw("planlock: the client connects to http://" + hostport + "/mcp; run the proxy there with: " + commandLineOf(run))
	} else {
		if len(upstream) > 0 {
			args = append(append(args, "--"), upstream...)
		}
		entry = client.stdio(self, args, nil)
	}

	if c.Bool("write") {
		path := c.String("file")
		if path == "" {
			if path, err = client.path(); err != nil {
				return failf("mcp-config: the %s configuration file: %v (give --file)", client.name, err)
			}
		}
		backup, err := writeClientConfig(path, client.key, name, entry)
		if err != nil {
			return failf("mcp-config: %v", err)
		}
		msg := fmt.Sprintf("Wrote server %q to %s", name, path)
		if backup != "" {
			msg += " (the previous file is " + backup + ")"
		}
		fmt.Fprintln(c.App.Writer, msg+".")
		return nil
	}
	if client.name == "claude-code" {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(entry); err != nil {
			return failf("%v", err)
		}
		_, err = fmt.Fprintf(c.App.Writer, "claude mcp add-json %s %s\n", shellQuote(name), shellQuote(strings.TrimSpace(b.String())))
		return err
	}
	out, err := marshalEntry(map[string]any{client.key: map[string]any{name: entry}}, "")
	if err != nil {
		return failf("%v", err)
	}
	_, err = fmt.Fprintf(c.App.Writer, "%s\n", out)
	return err
}

func upstreamWords(u *hclplan.Upstream) string {
	if u.URL != "" {
		return u.URL
	}
	return strings.Join(u.Command, " ")
}
