package main

import (
	"bytes"
	"context"
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
	"github.com/planlock/planlock/internal/jsonedit"
	"github.com/planlock/planlock/sign"
)

// mcpConfigOptions are the flags of planlock mcp-config.
type mcpConfigOptions struct {
	cmdline
	planOptions // passed on to the proxy
	stateOptions
	Name     string
	Client   string
	Write    bool
	File     string
	Listen   string
	Planlock string
}

func (o *mcpConfigOptions) flags() []cli.Flag {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "plan", Usage: "plan `FILE`", Required: true, Destination: &o.Plan},
		&cli.StringFlag{Name: "name", Usage: "server `NAME` in the client (default: the plan's name)", Destination: &o.Name},
		&cli.StringFlag{Name: "client", Usage: "print the shape of `CLIENT`: " + clientNames(), Destination: &o.Client},
		&cli.BoolFlag{Name: "write", Usage: "merge the entry into the client's configuration file (a .bak copy is kept)", Destination: &o.Write},
		&cli.StringFlag{Name: "file", Usage: "the client configuration `FILE` --write merges into", TakesFile: true, Destination: &o.File},
		&cli.StringFlag{Name: "listen", Usage: "the HTTP form: the proxy serves streamable HTTP on `ADDR` (the URL is http://ADDR/mcp)", Destination: &o.Listen},
		&cli.StringFlag{Name: "planlock", Usage: "the planlock `COMMAND` the client runs (default: this executable)", Destination: &o.Planlock},
		&cli.BoolFlag{Name: "insecure-skip-verify", Usage: "pass --insecure-skip-verify to the proxy (unsafe)", Destination: &o.InsecureSkipVerify},
		&cli.StringFlag{Name: "bundle", Usage: "the plan's bundle `FILE`, passed to the proxy", TakesFile: true, Destination: &o.Bundle},
		&cli.StringFlag{Name: "path", Usage: "the plan's `PATH` in the repository, passed to the proxy (default: relative to the Git checkout)", Destination: &o.Path},
	}
	flags = append(flags, o.stateOptions.flags()...)
	return append(flags, o.trustOptions.flags()...)
}

func mcpConfigCommand() *cli.Command {
	o := &mcpConfigOptions{}
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
		Flags:  o.flags(),
		Action: action(o, runMCPConfig),
	}
}

func runMCPConfig(_ context.Context, o *mcpConfigOptions) error {
	errw := o.errw
	client, ok := mcpClients[o.Client]
	if !ok && o.Client != "" {
		return usageErrorf("mcp-config: unknown --client %q (one of %s)", o.Client, clientNames())
	}
	if o.Write && !ok {
		return usageErrorf("mcp-config: --write needs --client")
	}
	if o.File != "" && !o.Write {
		return usageErrorf("mcp-config: --file goes with --write")
	}
	if o.Listen != "" && !ok {
		return usageErrorf("mcp-config: --listen needs --client (the HTTP form differs per client)")
	}
	if o.Listen != "" && client.http == nil {
		return usageErrorf("mcp-config: %s starts stdio servers only; drop --listen", client.name)
	}
	planPath, err := filepath.Abs(o.Plan)
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
	upstream := o.Args
	if plan.Upstream != nil && len(upstream) > 0 {
		// The plan's upstream is part of what was approved and signed:
		// the command line never overrides it. Repeating it is harmless.
		if !slices.Equal(plan.Upstream.Command, upstream) {
			return usageErrorf("the plan's upstream block names %s; -- gives %s: the signed plan decides the upstream, so drop -- COMMAND (or change the plan's upstream and approve it again)",
				upstreamWords(plan.Upstream), strings.Join(upstream, " "))
		}
		errw("planlock: note: the plan's upstream block already names this upstream; -- COMMAND is not needed")
		upstream = nil
	}
	if plan.Upstream == nil && len(upstream) == 0 {
		return usageErrorf("no upstream: give -- COMMAND ARGS... or an upstream block in the plan")
	}
	self := o.Planlock
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
	case o.InsecureSkipVerify && o.trustGiven() != "":
		return usageErrorf("give either --insecure-skip-verify or the trust flags, not both")
	case o.InsecureSkipVerify:
		extra = append(extra, "--insecure-skip-verify")
	case o.trustGiven() == "":
		return usageErrorf("%s", noTrustPolicy)
	default:
		args, err := o.trustArgs(&o.cmdline, o.Plan)
		if err != nil {
			return err
		}
		extra = append(extra, args...)
		// The entry is written either way (the plan may be signed later),
		// but a client that starts it now gets a refusal.
		bundle := o.Bundle
		if bundle == "" {
			bundle = sign.BundlePath(planPath)
		}
		if _, err := os.Stat(bundle); err != nil {
			abs, _ := filepath.Abs(bundle)
			errw(fmt.Sprintf("planlock: WARNING: %s has no bundle (no %s): the proxy this entry starts refuses the plan until it is signed (planlock sign)", o.Plan, abs))
		}
	}
	for _, f := range []struct{ name, dir string }{{"state", o.State}, {"state-root", o.StateRoot}} {
		if d := f.dir; d != "" && o.typed(f.name) {
			abs, err := filepath.Abs(d)
			if err != nil {
				return failf("%v", err)
			}
			extra = append(extra, "--"+f.name, abs)
		}
	}
	name := o.Name
	if name == "" {
		name = plan.Name
	}
	if !ok { // the generic form, as before --client
		out, err := catalog.MCPConfig(name, self, planPath, extra, upstream)
		if err != nil {
			return failf("%v", err)
		}
		_, err = o.IO.out.Write(out)
		return err
	}

	args := append([]string{"proxy", "--plan", planPath}, extra...)
	var entry serverEntry
	if addr := o.Listen; addr != "" {
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

	if o.Write {
		path := o.File
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
		fmt.Fprintln(o.IO.out, msg+".")
		return nil
	}
	if client.name == "claude-code" {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(entry); err != nil {
			return failf("%v", err)
		}
		_, err = fmt.Fprintf(o.IO.out, "claude mcp add-json %s %s\n", shellQuote(name), shellQuote(strings.TrimSpace(b.String())))
		return err
	}
	out, err := jsonedit.Marshal(map[string]any{client.key: map[string]any{name: entry}}, "")
	if err != nil {
		return failf("%v", err)
	}
	_, err = fmt.Fprintf(o.IO.out, "%s\n", out)
	return err
}

func upstreamWords(u *hclplan.Upstream) string {
	if u.URL != "" {
		return u.URL
	}
	return strings.Join(u.Command, " ")
}
