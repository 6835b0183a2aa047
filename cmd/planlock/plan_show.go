package main

import (
	"context"
	"fmt"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/boundedio"
	"github.com/urfave/cli/v2"
)

func planShowCommand() *cli.Command {
	o := &planShowOptions{}
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
		Flags:  o.flags(),
		Action: action(o, runPlanShow),
	}
}

// planShowOptions are the flags of planlock plan show.
type planShowOptions struct {
	cmdline
	JSON bool
}

func (o *planShowOptions) flags() []cli.Flag {
	return []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print the canonical JSON form", Destination: &o.JSON}}
}

func runPlanShow(_ context.Context, o *planShowOptions) error {
	if len(o.Args) != 1 {
		return usageErrorf("plan show: give exactly one plan file")
	}
	path := o.Args[0]
	src, err := boundedio.ReadFile(path, boundedio.MaxPlanBytes)
	if err != nil {
		return failf("plan show: %v", err)
	}
	p, diags := hclplan.Parse(path, src)
	if diags.HasErrors() {
		files := sources{}
		files.add(path, src)
		writeDiagnostics(o.IO.err, files, diags)
		return failf("plan show: %s is not a valid plan", path)
	}
	if o.JSON {
		out, err := hclplan.JSON(p) // the plan's canonical JSON (see jsonout.go)
		if err != nil {
			return failf("plan show: %v", err)
		}
		_, err = o.IO.out.Write(out)
		return err
	}
	_, err = fmt.Fprint(o.IO.out, hclplan.Summary(p))
	return err
}
