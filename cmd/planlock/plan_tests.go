package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/urfave/cli/v2"

	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/plantest"
)

func planTestCommand() *cli.Command {
	o := &planTestOptions{}
	return &cli.Command{
		Name:      "test",
		Usage:     "run a plan's tests (<plan>_test.hcl) against the real gate",
		ArgsUsage: "[PATH ...]",
		Description: `Runs the test blocks of <plan>_test.hcl, the file beside each plan, against
the plan with the proxy's own decision code and progress rules (count,
order, max_calls, on_error), without an upstream: pins are given in the
test. Each test starts from a fresh state; its calls run in order.

  test "refund within bounds" {
    pin { step = "refund" value = "9f86d081884c7d65" }
    call {
      tool   = "get_order"
      args   = { order_id = "4711" }
      expect = "allow"                  # "allow", "block" or "hold"
    }
    call {
      tool       = "refund_customer"
      args       = { order_id = "4711", amount = 31, currency = "EUR" }
      expect     = "block"
      reason_arg = "amount"             # also: reason_step, reason_contains
    }
  }

A call with fails = true is answered by the upstream with an error (it
still counts; on_error = "hold" puts its step on hold). Tests live beside
the plan, not in it, so they change without changing the signed digest.

A PATH is a plan file, its test file, or a directory of plan files (with
--recursive, subdirectories too). With no PATH, tests the plans of the
current directory.

Examples:
   planlock plan test                     # test ./*.hcl
   planlock plan test refund.hcl
   planlock plan test --recursive plans/
   planlock plan test --json refund.hcl

Exit status: 0 when every test passes, 1 when one fails or a file is
invalid, 2 on a usage error.`,
		Flags:  o.flags(),
		Action: action(o, runPlanTest),
	}
}

// planTestOptions are the flags of planlock plan test.
type planTestOptions struct {
	cmdline
	JSON      bool
	Recursive bool
}

func (o *planTestOptions) flags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "json", Usage: "print the results as JSON on standard output", Destination: &o.JSON},
		&cli.BoolFlag{Name: "recursive", Aliases: []string{"r"}, Usage: "in a directory PATH, also test the plans of subdirectories", Destination: &o.Recursive},
	}
}

func runPlanTest(_ context.Context, o *planTestOptions) error {
	args := o.Args
	if len(args) == 0 {
		args = []string{"."} // as plan fmt and plan validate
	}
	var plans []string
	for _, arg := range args {
		found, err := plantest.Files(arg, o.Recursive)
		if err != nil {
			return failf("plan test: %v", err)
		}
		if len(found) == 0 {
			return failf("plan test: %s", noPlanFiles(arg, 0))
		}
		plans = append(plans, found...)
	}
	reports, files, diags := runPlanTests(plans, time.Now())
	failed := false
	for _, r := range reports {
		failed = failed || r.Status == "FAIL"
	}
	failed = failed || diags.HasErrors()
	if o.JSON {
		if err := writeJSON(o.IO.out, newPlanTestJSON(reports, diags)); err != nil {
			return failf("plan test: %v", err)
		}
	} else {
		writeDiagnostics(o.IO.err, files, diags)
		writePlanTestText(o.IO.out, reports, failed)
	}
	if failed {
		return silentExit(exitFailure)
	}
	return nil
}

func runPlanTests(plans []string, now time.Time) ([]planTestReport, sources, hcl.Diagnostics) {
	files := sources{}
	var all hcl.Diagnostics
	var out []planTestReport
	for _, path := range plans {
		r := planTestReport{Plan: path, Tests: plantest.TestPath(path), Result: []plantest.TestResult{}}
		plan, diags := readPlanFile(path, files)
		all = append(all, diags...)
		if plan == nil {
			r.Status, r.Error = "FAIL", "the plan file is invalid"
			out = append(out, r)
			continue
		}
		src, err := os.ReadFile(r.Tests)
		if errors.Is(err, fs.ErrNotExist) {
			r.Status = "no tests"
			out = append(out, r)
			continue
		}
		if err != nil {
			r.Status, r.Error = "FAIL", err.Error()
			out = append(out, r)
			continue
		}
		files.add(r.Tests, src)
		tf, tdiags := hclplan.ParseTests(r.Tests, src)
		all = append(all, tdiags...)
		if tf == nil {
			r.Status, r.Error = "FAIL", "the test file is invalid"
			out = append(out, r)
			continue
		}
		r.Result = plantest.Run(plan, tf, now)
		r.Status = "ok"
		for _, t := range r.Result {
			if !t.Pass {
				r.Status = "FAIL"
			}
		}
		out = append(out, r)
	}
	sortDiagnostics(all)
	return out, files, all
}

func readPlanFile(path string, files sources) (*hclplan.Plan, hcl.Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read file", Detail: err.Error(), Subject: &hcl.Range{Filename: path}}}
	}
	files.add(path, src)
	return hclplan.Parse(path, src)
}

// writePlanTestText prints the results as go test does.
func writePlanTestText(w io.Writer, reports []planTestReport, failed bool) {
	for _, r := range reports {
		for _, t := range r.Result {
			if t.Pass {
				fmt.Fprintf(w, "--- PASS: %s\n", t.Name)
				continue
			}
			fmt.Fprintf(w, "--- FAIL: %s\n", t.Name)
			for _, c := range t.Calls {
				if c.Problem != "" {
					fmt.Fprintf(w, "    %s: call %d (%s): %s\n", c.Pos, c.Index, c.Tool, c.Problem)
				}
			}
			if t.Error != "" {
				fmt.Fprintf(w, "    %s\n", t.Error)
			}
		}
		switch r.Status {
		case "ok":
			fmt.Fprintf(w, "ok  \t%s\t%s\n", r.Plan, plural(len(r.Result), "test", "tests"))
		case "no tests":
			fmt.Fprintf(w, "?   \t%s\t[no test file %s]\n", r.Plan, r.Tests)
		default:
			if r.Error != "" {
				fmt.Fprintf(w, "FAIL\t%s\t%s\n", r.Plan, r.Error)
			} else {
				fmt.Fprintf(w, "FAIL\t%s\t%d of %s failed\n", r.Plan, failedTests(r.Result), plural(len(r.Result), "test", "tests"))
			}
		}
	}
	if failed {
		fmt.Fprintln(w, "FAIL")
	}
}

func failedTests(rs []plantest.TestResult) int {
	n := 0
	for _, t := range rs {
		if !t.Pass {
			n++
		}
	}
	return n
}

// approveTests adds the plan's test file, when there is one, to the
// approval pull request; an invalid one stops the approval.
func approveTests(planPath string, repo *gitapprove.Repo, req *gitapprove.ApproveRequest) error {
	tp := plantest.TestPath(planPath)
	src, err := os.ReadFile(tp)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return failf("approve: %v", err)
	}
	if _, diags := hclplan.ParseTests(tp, src); diags.HasErrors() {
		return failf("approve: %s is not a valid test file: %s", tp, oneLineDiags(diags.Error()))
	}
	rel, err := repo.RelPath(tp)
	if err != nil {
		return failf("approve: %v", err)
	}
	req.TestsPath, req.Tests = rel, src
	return nil
}
