package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/boundedio"
	"github.com/planlock/planlock/internal/plantest"
	"github.com/urfave/cli/v2"
)

func planValidateCommand() *cli.Command {
	o := &planValidateOptions{}
	return &cli.Command{
		Name:      "validate",
		Usage:     "check plan files against the plan language (and an upstream's tools)",
		ArgsUsage: "[PATH ...]",
		Description: `Checks every file and reports every problem with file:line:col and a source
snippet: syntax, unknown blocks and attributes, wrong types, duplicate steps
or arguments, min > max, invalid patterns, max_calls < 1, expires not in
RFC 3339, upstream with both or neither of command and url, no step, more
than one plan per file. With --tools, also checks tool names and arguments
against the upstream's tools/list result (from "planlock tools --json").

A directory PATH means its .hcl files (with --recursive, those of its
subdirectories too), as for plan fmt; a directory with no plan file is an
error. With no PATH, checks the .hcl files of the current directory.
Diagnostics are sorted by file, line and column.

Examples:
   planlock plan validate                 # check ./*.hcl
   planlock plan validate refund.hcl
   planlock plan validate --recursive plans/
   planlock plan validate --json plans/*.hcl
   planlock tools --json -- node server.js > tools.json
   planlock plan validate --tools tools.json refund.hcl

Exit status: 0 when every file is valid, 1 otherwise.`,
		Flags:  o.flags(),
		Action: action(o, runPlanValidate),
	}
}

// planValidateOptions are the flags of planlock plan validate.
type planValidateOptions struct {
	cmdline
	JSON      bool
	Tools     string
	Recursive bool
}

func (o *planValidateOptions) flags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "json", Usage: "print the result as JSON on standard output", Destination: &o.JSON},
		&cli.StringFlag{Name: "tools", Usage: "an MCP tools/list result (JSON) to check tools and arguments against", TakesFile: true, Destination: &o.Tools},
		&cli.BoolFlag{Name: "recursive", Aliases: []string{"r"}, Usage: "in a directory PATH, also check the .hcl files of subdirectories", Destination: &o.Recursive},
	}
}

func runPlanValidate(_ context.Context, o *planValidateOptions) error {
	args := o.Args
	if len(args) == 0 {
		args = []string{"."} // as plan fmt and terraform validate
	}
	var tools []hclplan.Tool
	if path := o.Tools; path != "" {
		data, err := boundedio.ReadFile(path, boundedio.MaxToolsBytes)
		if err != nil {
			return failf("plan validate: %v", err)
		}
		tools, err = hclplan.ParseToolList(data)
		if err != nil {
			return failf("plan validate: %s: %v", path, err)
		}
	}
	var paths []string
	for _, arg := range args {
		found, skipped, err := planFiles(arg, o.Recursive)
		if err != nil {
			// Reported with the other problems, as "Cannot read file".
			paths = append(paths, arg)
			continue
		}
		if len(found) == 0 {
			return failf("plan validate: %s", noPlanFiles(arg, skipped))
		}
		paths = append(paths, found...)
	}
	files := sources{}
	var all hcl.Diagnostics
	invalid := 0
	for _, path := range paths {
		diags := validateFile(path, files, tools, o.given("tools"))
		if diags.HasErrors() {
			invalid++
		}
		all = append(all, diags...)
	}
	sortDiagnostics(all)
	if o.JSON {
		if err := writeJSON(o.IO.out, newValidateJSON(all)); err != nil {
			return failf("plan validate: %v", err)
		}
	} else {
		writeDiagnostics(o.IO.err, files, all)
		if invalid == 0 {
			fmt.Fprintf(o.IO.out, "%s valid.\n", plural(len(paths), "plan file is", "plan files are"))
		}
	}
	if invalid > 0 {
		if !o.JSON {
			return failf("%d of %s invalid", invalid, plural(len(paths), "plan file", "plan files"))
		}
		return silentExit(exitFailure)
	}
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func validateFile(path string, files sources, tools []hclplan.Tool, withTools bool) hcl.Diagnostics {
	src, err := boundedio.ReadFile(path, boundedio.MaxPlanBytes)
	if err != nil {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot read file",
			Detail:   err.Error(),
			Subject:  &hcl.Range{Filename: path},
		}}
	}
	files.add(path, src)
	if plantest.IsTestFile(path) {
		_, diags := hclplan.ParseTests(path, src)
		return diags
	}
	p, diags := hclplan.Parse(path, src)
	if p == nil {
		return diags
	}
	diags = append(diags, p.Warnings(time.Now())...)
	diags = append(diags, noTestsWarning(p, path)...)
	if withTools {
		diags = append(diags, hclplan.CheckTools(p, tools)...)
	}
	return diags
}

// noTestsWarning warns (never fails) when a plan has no test file beside
// it: a reviewer should see what the plan allows and blocks.
func noTestsWarning(p *hclplan.Plan, path string) hcl.Diagnostics {
	tp := plantest.TestPath(path)
	if _, err := os.Stat(tp); err == nil {
		return nil
	}
	r := p.DeclRange
	return hcl.Diagnostics{{
		Severity: hcl.DiagWarning,
		Summary:  "Plan has no tests",
		Detail:   fmt.Sprintf("Write test blocks in %s to show what this plan allows, blocks and holds; run them with planlock plan test.", tp),
		Subject:  &r,
	}}
}
