package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/boundedio"
	"github.com/urfave/cli/v2"
)

func planValidateCommand() *cli.Command {
	return &cli.Command{
		Name:      "validate",
		Usage:     "check plan files against the plan language (and an upstream's tools)",
		ArgsUsage: "PATH ...",
		Description: `Checks every file and reports every problem with file:line:col and a source
snippet: syntax, unknown blocks and attributes, wrong types, duplicate steps
or arguments, min > max, invalid patterns, max_calls < 1, expires not in
RFC 3339, upstream with both or neither of command and url, no step, more
than one plan per file. With --tools, also checks tool names and arguments
against the upstream's tools/list result (from "planlock tools --json").

A directory PATH means its .hcl files (with --recursive, those of its
subdirectories too), as for plan fmt; a directory with no plan file is an
error. Diagnostics are sorted by file, line and column.

Examples:
   planlock plan validate refund.hcl
   planlock plan validate --recursive plans/
   planlock plan validate --json plans/*.hcl
   planlock tools --json -- node server.js > tools.json
   planlock plan validate --tools tools.json refund.hcl

Exit status: 0 when every file is valid, 1 otherwise.`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON on standard output"},
			&cli.StringFlag{Name: "tools", Usage: "an MCP tools/list result (JSON) to check tools and arguments against", TakesFile: true},
			&cli.BoolFlag{Name: "recursive", Aliases: []string{"r"}, Usage: "in a directory PATH, also check the .hcl files of subdirectories"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return usageErrorf("plan validate: give at least one plan file")
			}
			var tools []hclplan.Tool
			if path := c.String("tools"); path != "" {
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
			for _, arg := range c.Args().Slice() {
				found, skipped, err := planFiles(arg, c.Bool("recursive"))
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
				diags := validateFile(path, files, tools, c.IsSet("tools"))
				if diags.HasErrors() {
					invalid++
				}
				all = append(all, diags...)
			}
			sortDiagnostics(all)
			if c.Bool("json") {
				if err := writeValidateJSON(c.App.Writer, all); err != nil {
					return failf("plan validate: %v", err)
				}
			} else {
				writeDiagnostics(c.App.ErrWriter, files, all)
				if invalid == 0 {
					fmt.Fprintf(c.App.Writer, "%s valid.\n", plural(len(paths), "plan file is", "plan files are"))
				}
			}
			if invalid > 0 {
				if !c.Bool("json") {
					return failf("%d of %s invalid", invalid, plural(len(paths), "plan file", "plan files"))
				}
				return silentExit(exitFailure)
			}
			return nil
		},
	}
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
	p, diags := hclplan.Parse(path, src)
	if p == nil {
		return diags
	}
	diags = append(diags, p.Warnings(time.Now())...)
	if withTools {
		diags = append(diags, hclplan.CheckTools(p, tools)...)
	}
	return diags
}

type jsonDiagnostic struct {
	File      string `json:"file"`
	Line      int    `json:"line"`
	Column    int    `json:"column"`
	EndLine   int    `json:"end_line"`
	EndColumn int    `json:"end_column"`
	Severity  string `json:"severity"`
	Summary   string `json:"summary"`
	Detail    string `json:"detail"`
}

func writeValidateJSON(w interface{ Write([]byte) (int, error) }, diags hcl.Diagnostics) error {
	out := struct {
		Valid        bool             `json:"valid"`
		ErrorCount   int              `json:"error_count"`
		WarningCount int              `json:"warning_count"`
		Diagnostics  []jsonDiagnostic `json:"diagnostics"`
	}{Diagnostics: []jsonDiagnostic{}}
	for _, d := range diags {
		jd := jsonDiagnostic{Severity: "error", Summary: d.Summary, Detail: d.Detail}
		if d.Severity == hcl.DiagWarning {
			jd.Severity = "warning"
			out.WarningCount++
		} else {
			out.ErrorCount++
		}
		if d.Subject != nil {
			jd.File = d.Subject.Filename
			jd.Line, jd.Column = d.Subject.Start.Line, d.Subject.Start.Column
			jd.EndLine, jd.EndColumn = d.Subject.End.Line, d.Subject.End.Column
		}
		out.Diagnostics = append(out.Diagnostics, jd)
	}
	out.Valid = out.ErrorCount == 0
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
