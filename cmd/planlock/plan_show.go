package main

import (
	"fmt"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/boundedio"
	"github.com/urfave/cli/v2"
)

func planShowCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "summarise a plan in plain words (the approval pull request's body)",
		ArgsUsage: "PATH",
		Description: `Prints what the plan lets an agent do, in Markdown that reads well as the
body of an approval pull request: goal, upstream, each step with its tool,
limits, pins and approvals, expiry, and the sha256 of the file's exact bytes.
--json prints a canonical JSON form with a stable key order instead.

Examples:
   planlock plan show refund.hcl
   planlock plan show --json refund.hcl | jq '.steps[].tool'`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the canonical JSON form"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageErrorf("plan show: give exactly one plan file")
			}
			path := c.Args().First()
			src, err := boundedio.ReadFile(path, boundedio.MaxPlanBytes)
			if err != nil {
				return failf("plan show: %v", err)
			}
			p, diags := hclplan.Parse(path, src)
			if diags.HasErrors() {
				files := sources{}
				files.add(path, src)
				writeDiagnostics(c.App.ErrWriter, files, diags)
				return failf("plan show: %s is not a valid plan", path)
			}
			if c.Bool("json") {
				out, err := hclplan.JSON(p)
				if err != nil {
					return failf("plan show: %v", err)
				}
				_, err = c.App.Writer.Write(out)
				return err
			}
			_, err = fmt.Fprint(c.App.Writer, hclplan.Summary(p))
			return err
		},
	}
}
