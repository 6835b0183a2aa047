package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/hclplan/plandiff"
	"github.com/planlock/planlock/hclplan/toolpin"
	"github.com/planlock/planlock/internal/boundedio"
	"github.com/planlock/planlock/internal/plantest"
	"github.com/planlock/planlock/internal/suggest"
)

func planSuggestCommand() *cli.Command {
	o := &planSuggestOptions{}
	return &cli.Command{
		Name:  "suggest",
		Usage: "write the tightest plan (and its tests) that allows the calls an audit log records",
		Description: `Reads an audit log (verified first; typically from planlock proxy --mode
observe) and writes the tightest plan that would have allowed every call it
records, with <plan>_test.hcl beside it: the observed runs replayed as
allowed, calls just outside each learned bound blocked.

Learned: one step per tool; eq where a value never varied; enum for up to 5
strings (or for values of other types: exactly those seen); min/max from
numbers; max_length from strings; max_calls from the most calls in one run
(per plan digest) plus --margin; order "sequential" when every run called
the tools in one order, else "any". A pattern comes only from --pattern,
never guessed. Every line carries a comment saying what it was learned from.
A redacted log (--audit-redact) cannot be learned from. The log records
calls, not tool definitions: --tools FILE (from planlock tools --json) pins
each step's tool to its definition in FILE.

With --plan, the plan's name and goal are kept and the power diff against
it is printed: what the suggestion allows that the plan did not, and the
other way round.

Examples:
   planlock plan suggest --from-audit audit.jsonl --name refund-4711
   planlock plan suggest --from-audit audit.jsonl --plan refund.hcl --margin 20%

Exit status: 0 when the files were written, 1 on a failure, 2 on a usage
error. Existing files are never overwritten.`,
		Flags:  o.flags(),
		Action: action(o, runPlanSuggest),
	}
}

// planSuggestOptions are the flags of planlock plan suggest.
type planSuggestOptions struct {
	cmdline
	FromAudit string
	Plan      string
	Margin    string
	Name      string
	Output    string
	Pattern   cli.StringSlice
	Tools     string
}

func (o *planSuggestOptions) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "from-audit", Usage: "the audit log `FILE` to learn from", Required: true, TakesFile: true, Destination: &o.FromAudit},
		&cli.StringFlag{Name: "plan", Usage: "the current plan `FILE`: keep its name and goal, print the power diff against it", TakesFile: true, Destination: &o.Plan},
		&cli.StringFlag{Name: "margin", Value: "0%", Usage: "add `N%` to each observed max_calls (rounded up)", Destination: &o.Margin},
		&cli.StringFlag{Name: "name", Usage: "the plan's `NAME` (default: --plan's, else \"suggested\")", Destination: &o.Name},
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the plan to `FILE` (default NAME.hcl, or PLAN.suggested.hcl with --plan); its tests go beside it", Destination: &o.Output},
		&cli.StringFlag{Name: "tools", Usage: "a tools/list result `FILE` (planlock tools --json): pin each step's tool definition to it (the audit log records no definitions)", TakesFile: true, Destination: &o.Tools},
		&cli.StringSliceFlag{Name: "pattern", Usage: "a pattern hint `TOOL.ARG=REGEX` (repeatable); every observed value must match it", Destination: &o.Pattern},
	}
}

func runPlanSuggest(_ context.Context, opts *planSuggestOptions) error {
	if len(opts.Args) > 0 {
		return usageErrorf("plan suggest: unexpected argument %q (give the audit log with --from-audit)", opts.Args[0])
	}
	margin, err := parseMargin(opts.Margin)
	if err != nil {
		return err
	}
	hints := map[string]string{}
	for _, h := range opts.Pattern.Value() {
		k, re, ok := strings.Cut(h, "=")
		if !ok || k == "" {
			return usageErrorf("--pattern %q: give TOOL.ARG=REGEX", h)
		}
		hints[k] = re
	}
	o := suggest.Options{MarginPercent: margin, Patterns: hints, Source: filepath.Base(opts.FromAudit)}
	if path := opts.Tools; path != "" {
		pins, err := readToolPins(path)
		if err != nil {
			return failf("plan suggest: --tools: %v", err)
		}
		o.ToolPins, o.ToolsSource = pins, filepath.Base(path)
	}
	var current *hclplan.Plan
	if path := opts.Plan; path != "" {
		p, diags := readPlanFile(path, sources{})
		if p == nil {
			return failf("plan suggest: %s is not a valid plan: %s", path, oneLineDiags(diags.Error()))
		}
		current, o.Name, o.Goal = p, p.Name, p.Goal
		// Keep the plan's step names where a tool has one step, so the
		// power diff compares step with step.
		o.StepNames = map[string]string{}
		for _, tool := range p.Tools() {
			if st := p.StepsForTool(tool); len(st) == 1 {
				o.StepNames[tool] = st[0].Name
			}
		}
	}
	if n := opts.Name; n != "" {
		o.Name = n
	}
	if o.Name == "" {
		o.Name = "suggested"
	}
	out := opts.Output
	switch {
	case out != "":
	case current != nil:
		out = strings.TrimSuffix(opts.Plan, ".hcl") + ".suggested.hcl"
	default:
		out = o.Name + ".hcl"
	}
	if filepath.Ext(out) != ".hcl" || plantest.IsTestFile(out) {
		return usageErrorf("--output %q: a plan file ends in .hcl (and not _test.hcl)", out)
	}
	o.Filename = out
	src, err := os.ReadFile(opts.FromAudit)
	if err != nil {
		return failf("plan suggest: %v", err)
	}
	calls, err := suggest.ReadAudit(src)
	if err != nil {
		return failf("plan suggest: %s: %v", opts.FromAudit, err)
	}
	res, err := suggest.Suggest(calls, o)
	if err != nil {
		return failf("plan suggest: %v", err)
	}
	testOut := plantest.TestPath(out)
	for _, f := range []string{out, testOut} {
		if _, err := os.Lstat(f); err == nil {
			return failf("plan suggest: %s exists; it is never overwritten (give --output)", f)
		}
	}
	if err := writeNew(out, res.Plan); err != nil {
		return failf("plan suggest: %v", err)
	}
	if err := writeNew(testOut, res.Tests); err != nil {
		return failf("plan suggest: %v", err)
	}
	fmt.Fprintf(opts.IO.err, "planlock: wrote %s and %s, learned from %s; review every line before approving it\n",
		out, testOut, plural(len(calls), "call", "calls"))
	if current != nil {
		fmt.Fprint(opts.IO.out, plandiff.Format(opts.Plan, plandiff.Diff(current, res.Parsed)))
	}
	return nil
}

// readToolPins reads a tools/list result and the tool_pin of each tool.
func readToolPins(path string) (map[string]suggest.ToolPin, error) {
	data, err := boundedio.ReadFile(path, boundedio.MaxToolsBytes)
	if err != nil {
		return nil, err
	}
	tools, err := hclplan.ParseToolList(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	pins := make(map[string]suggest.ToolPin, len(tools))
	for _, t := range tools {
		d, err := toolpin.Digest(t.Raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		pins[t.Name] = suggest.ToolPin{Digest: d, Description: t.Description, Definition: t.Raw}
	}
	return pins, nil
}

// parseMargin reads "20%" or "20".
func parseMargin(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(s), "%"))
	if err != nil || n < 0 || n > 1000 {
		return 0, usageErrorf("--margin %q: give a percentage from 0%% to 1000%%, such as 20%%", s)
	}
	return n, nil
}

// writeNew creates path (never replacing a file) with data.
func writeNew(path string, data []byte) error {
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
