// Package plantest runs a plan's tests (<plan>_test.hcl) against the real
// gate: gate.Decide with the same progress rules the proxy applies after a
// forwarded call (count, order, on_error hold), pins as the test gives them,
// and no upstream.
package plantest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/proxy/gate"
)

// TestPath is where the tests of the plan file at planPath live:
// refund.hcl → refund_test.hcl.
func TestPath(planPath string) string {
	return strings.TrimSuffix(planPath, ".hcl") + "_test.hcl"
}

// IsTestFile reports whether path names a plan test file.
func IsTestFile(path string) bool { return strings.HasSuffix(path, "_test.hcl") }

// PlanPath is the plan file a test file belongs to.
func PlanPath(testPath string) string { return strings.TrimSuffix(testPath, "_test.hcl") + ".hcl" }

// CallResult is what the plan decided for one call of a test.
type CallResult struct {
	Index  int    `json:"index"` // 1-based
	Tool   string `json:"tool"`
	Expect string `json:"expect"`
	Got    string `json:"got"`
	Step   string `json:"step,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Problem is why the call fails its expectation ("" when it passes).
	Problem string `json:"problem,omitempty"`
	Pos     string `json:"pos"`
}

// TestResult is one test's outcome.
type TestResult struct {
	Name  string       `json:"name"`
	Pass  bool         `json:"pass"`
	Calls []CallResult `json:"calls"`
	// Error is a problem of the test itself (such as a pinned step called
	// without a pin given).
	Error string `json:"error,omitempty"`
}

// Run runs every test of tf against plan. now is the clock for tests that
// do not set their own.
func Run(plan *hclplan.Plan, tf *hclplan.TestFile, now time.Time) []TestResult {
	g := gate.New(plan)
	out := make([]TestResult, 0, len(tf.Tests))
	for _, t := range tf.Tests {
		out = append(out, runOne(g, plan, t, now))
	}
	return out
}

// progress is a test's state, as the ledger keeps it for one plan digest.
type progress struct {
	current int
	used    map[int]int
	done    map[int]bool
	held    map[int]string
}

func (p *progress) Current() int    { return p.current }
func (p *progress) Done(i int) bool { return p.done[i] }
func (p *progress) Calls(i int) int { return p.used[i] }

func runOne(g *gate.Gate, plan *hclplan.Plan, t *hclplan.PlanTest, now time.Time) TestResult {
	if !t.Now.IsZero() {
		now = t.Now
	}
	res := TestResult{Name: t.Name, Pass: true}
	pins := map[string]*hclplan.TestPin{}
	for _, p := range t.Pins {
		if plan.Step(p.Step) == nil {
			res.Pass, res.Error = false, fmt.Sprintf("%s: pin of step %q: the plan has no such step", pos(p.DeclRange), p.Step)
			return res
		}
		if plan.Step(p.Step).Pin == nil {
			res.Pass, res.Error = false, fmt.Sprintf("%s: pin of step %q: that step has no pin", pos(p.DeclRange), p.Step)
			return res
		}
		pins[p.Step] = p
	}
	pr := &progress{used: map[int]int{}, done: map[int]bool{}, held: map[int]string{}}
	for i, c := range t.Calls {
		cr := CallResult{Index: i + 1, Tool: c.Tool, Expect: c.Expect, Pos: pos(c.DeclRange)}
		d := g.Decide(gate.Input{Now: now, Tool: c.Tool, Args: c.Args.Object(), Progress: pr,
			OnErrorHeld: func(i int) (string, bool) { why, ok := pr.held[i]; return why, ok }})
		var err error
		cr.Got, cr.Step, cr.Reason, err = act(d, pins, pr, c.Fails)
		if err != nil {
			res.Pass, res.Error = false, fmt.Sprintf("%s: call %d (%s): %v", cr.Pos, cr.Index, c.Tool, err)
			res.Calls = append(res.Calls, cr)
			return res
		}
		cr.Problem = check(c, cr)
		if cr.Problem != "" {
			res.Pass = false
		}
		res.Calls = append(res.Calls, cr)
	}
	return res
}

// act applies a decision the way the proxy's act step does, without an
// upstream: a Forward reads the test's pin, is counted and completes as
// the test says (fails = true is a failed upstream call).
func act(d gate.Decision, pins map[string]*hclplan.TestPin, pr *progress, fails bool) (got, step, reason string, err error) {
	switch d.Kind {
	case gate.KindBlock:
		return hclplan.ExpectBlock, stepName(d.Block.Step), d.Block.Reason, nil
	case gate.KindHold:
		return hclplan.ExpectHold, stepName(d.Hold.Step), d.Hold.Reason, nil
	case gate.KindForward:
	default:
		return "", "", "", errors.New("the gate made no decision")
	}
	f := d.Forward
	s := f.Step
	if f.PinCheck {
		p := pins[s.Name]
		if p == nil {
			return "", "", "", fmt.Errorf("step %q is pinned: give pin { step = %q value = ... } in the test (or fails = true)", s.Name, s.Name)
		}
		switch {
		case p.Fails:
			h := f.PinHold(fmt.Sprintf("step %q: pin read %s(%s) failed", s.Name, s.Pin.Tool, s.Pin.Args.String()))
			return hclplan.ExpectHold, s.Name, h.Reason, nil
		case !s.Pin.Eq.Equal(p.Value.Interface()):
			h := f.PinHold(fmt.Sprintf("step %q: pin %s.%s = %s, want %s (it changed since the plan was approved)", s.Name, s.Pin.Tool, s.Pin.Field, p.Value.String(), s.Pin.Eq.String()))
			return hclplan.ExpectHold, s.Name, h.Reason, nil
		}
	}
	// The count, as the ledger takes it (Reserve) and replays it.
	pr.used[s.Index]++
	pr.current = max(pr.current, s.Index)
	if fails {
		if s.OnError == hclplan.ErrorHold {
			pr.held[s.Index] = fmt.Sprintf("step %q is on hold after a failed call (tool error)", s.Name)
		}
	} else {
		pr.done[s.Index] = true
		delete(pr.held, s.Index)
	}
	return hclplan.ExpectAllow, s.Name, "", nil
}

func stepName(s *hclplan.Step) string {
	if s == nil {
		return ""
	}
	return s.Name
}

// check compares one call's decision with its expectation.
func check(c *hclplan.TestCall, r CallResult) string {
	if r.Got != c.Expect {
		why := ""
		if r.Reason != "" {
			why = ": " + r.Reason
		}
		return fmt.Sprintf("got %s, want %s%s", r.Got, c.Expect, why)
	}
	if c.ReasonStep != "" && r.Step != c.ReasonStep {
		return fmt.Sprintf("%s by step %q, want step %q (%s)", r.Got, r.Step, c.ReasonStep, r.Reason)
	}
	if c.ReasonArg != "" && !strings.Contains(r.Reason, fmt.Sprintf("argument %q", c.ReasonArg)) {
		return fmt.Sprintf("%s, but not for argument %q: %s", r.Got, c.ReasonArg, r.Reason)
	}
	if c.ReasonContains != "" && !strings.Contains(r.Reason, c.ReasonContains) {
		return fmt.Sprintf("%s, but the reason does not contain %q: %s", r.Got, c.ReasonContains, r.Reason)
	}
	return ""
}

func pos(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

// Files expands the PATH arguments of plan test: a plan file is itself, a
// test file means its plan, a directory its plan files (with recursive, in
// subdirectories too). Test files themselves are never plans.
func Files(path string, recursive bool) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		if IsTestFile(path) {
			return []string{PlanPath(path)}, nil
		}
		return []string{path}, nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != path && (!recursive || strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if filepath.Ext(p) == ".hcl" && !IsTestFile(p) && d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return files, nil
}
