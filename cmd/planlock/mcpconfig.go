package main

import (
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/boundedio"
	"github.com/planlock/planlock/proxy/catalog"
)

func mcpConfigCommand() *cli.Command {
	return &cli.Command{
		Name:      "mcp-config",
		Usage:     "print the MCP client snippet (Claude Desktop, Cursor, Claude Code) that runs an upstream behind planlock",
		ArgsUsage: "[-- UPSTREAM_COMMAND ARGS...]",
		Description: `Paste the "mcpServers" entry into claude_desktop_config.json, .cursor/mcp.json
or .mcp.json (Claude Code). Paths are made absolute, since clients start
servers from another directory. The trust flags (as for planlock proxy) are
passed on, so that the proxy the client starts verifies the plan.`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "plan", Usage: "plan `FILE`", Required: true},
			&cli.StringFlag{Name: "name", Usage: "server `NAME` in the client (default: the plan's name)"},
			&cli.StringFlag{Name: "state", Usage: "state `DIR` to pass to the proxy"},
			&cli.BoolFlag{Name: "insecure-skip-verify", Usage: "pass --insecure-skip-verify to the proxy (unsafe)"},
			&cli.StringFlag{Name: "bundle", Usage: "the plan's bundle `FILE`, passed to the proxy", TakesFile: true},
			&cli.StringFlag{Name: "path", Usage: "the plan's `PATH` in the repository, passed to the proxy (default: relative to the Git checkout)"},
		}, trustFlags()...),
		Action: func(c *cli.Context) error {
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
				return usageErrorf("the plan has an upstream block; do not give -- COMMAND as well")
			}
			if plan.Upstream == nil && len(upstream) == 0 {
				return usageErrorf("no upstream: give -- COMMAND ARGS... or an upstream block in the plan")
			}
			self, err := os.Executable()
			if err != nil {
				return failf("find the planlock executable: %v", err)
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
			if d := c.String("state"); d != "" {
				abs, err := filepath.Abs(d)
				if err != nil {
					return failf("%v", err)
				}
				extra = append(extra, "--state", abs)
			}
			name := c.String("name")
			if name == "" {
				name = plan.Name
			}
			out, err := catalog.MCPConfig(name, self, planPath, extra, upstream)
			if err != nil {
				return failf("%v", err)
			}
			_, err = c.App.Writer.Write(out)
			return err
		},
	}
}
