package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/proxy"
)

// observeOptions are the operator's observe-mode flags of planlock proxy.
// A plan can never turn observing on: only these flags do.
type observeOptions struct {
	Mode        string
	ObserveStep cli.StringSlice
}

func (o *observeOptions) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "mode", Value: "enforce", Usage: "`enforce` the plan, or observe: forward every call the upstream offers, uncounted, and audit what the plan would have decided (rollout; see docs/rollout.md)", Destination: &o.Mode},
		&cli.StringSliceFlag{Name: "observe-step", Usage: "audit and forward, instead of blocking or holding, the calls the plan refuses for step `NAME` (repeatable); everything else is enforced", Destination: &o.ObserveStep},
	}
}

// observe reads --mode and --observe-step, and warns loudly at start when
// anything is observed rather than enforced.
func (oo *observeOptions) observe(plan *hclplan.Plan, errw func(string)) (proxy.Observe, error) {
	var o proxy.Observe
	steps := oo.ObserveStep.Value()
	switch m := oo.Mode; m {
	case "enforce":
	case "observe":
		if len(steps) > 0 {
			return o, usageErrorf("--mode observe observes every step; --observe-step is for enforce mode")
		}
		o.All = true
	default:
		return o, usageErrorf("--mode %q: give enforce or observe", m)
	}
	for _, s := range steps {
		if plan.Step(s) == nil {
			return o, usageErrorf("--observe-step %q: plan %q has no such step (it has %s)", s, plan.Name, stepNames(plan))
		}
	}
	o.Steps = steps
	switch {
	case o.All:
		errw(fmt.Sprintf("planlock: WARNING: observe mode: plan %q is NOT enforced. Every call the upstream offers is forwarded and counted against nothing; the audit log records what the plan would have decided (would_block, would_hold). For a rollout only.", plan.Name))
	case len(steps) > 0:
		errw(fmt.Sprintf("planlock: WARNING: observing step(s) %s of plan %q: calls the plan refuses there are forwarded, uncounted, and only audited (would_block, would_hold)", strings.Join(steps, ", "), plan.Name))
	}
	return o, nil
}

func stepNames(plan *hclplan.Plan) string {
	names := make([]string, len(plan.Steps))
	for i, s := range plan.Steps {
		names[i] = fmt.Sprintf("%q", s.Name)
	}
	return strings.Join(names, ", ")
}
