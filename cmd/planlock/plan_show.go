package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/boundedio"
	"github.com/planlock/planlock/internal/plantest"
	"github.com/urfave/cli/v2"
)

func planShowCommand() *cli.Command {
	o := &planShowOptions{}
	return &cli.Command{
		Name:      "show",
		Usage:     "summarise a plan in plain words (the approval pull request's body)",
		ArgsUsage: "[PATH]",
		Description: `Prints what the plan lets an agent do, in Markdown that reads well as the
body of an approval pull request: goal, upstream, each step with its tool,
limits, pins and approvals, expiry, and the sha256 of the file's exact bytes.
--json prints a canonical JSON form with a stable key order instead. With no
PATH (or a directory), shows the one plan of the current directory (or of
that directory); where there are several, name one.

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
	if len(o.Args) > 1 {
		return usageErrorf("plan show: give one plan file, not %d", len(o.Args))
	}
	path, err := onePlan(o.Args)
	if err != nil {
		return err
	}
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

// onePlan is plan show's plan: the file given, else the one plan (an .hcl
// file, not a test file) of the directory given or of the current one.
func onePlan(args []string) (string, error) {
	dir := "."
	if len(args) == 1 {
		st, err := os.Stat(args[0])
		if err != nil || !st.IsDir() {
			return args[0], nil // read (and its error reported) as a file
		}
		dir = args[0]
	}
	plans, err := plantest.Files(dir, false)
	if err != nil {
		return "", failf("plan show: %v", err)
	}
	where := dir
	if dir == "." {
		where = "the current directory"
	}
	switch len(plans) {
	case 1:
		return plans[0], nil
	case 0:
		return "", failf("plan show: no plan file (.hcl) in %s; give one", where)
	default:
		names := make([]string, len(plans))
		for i, p := range plans {
			names[i] = filepath.Base(p)
		}
		return "", usageErrorf("plan show: %s has %d plan files (%s); give one", where, len(plans), strings.Join(names, ", "))
	}
}
