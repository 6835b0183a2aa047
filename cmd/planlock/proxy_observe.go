package main

import (
	"github.com/urfave/cli/v2"

	"github.com/planlock/planlock/internal/planrun"
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

// observe is the gate's observe mode (internal/planrun); anyPlan (serve)
// observes each plan's steps among --observe-step instead of refusing a
// plan without them.
func (oo *observeOptions) observe(anyPlan bool) planrun.ObserveOptions {
	return planrun.ObserveOptions{Mode: oo.Mode, Steps: oo.ObserveStep.Value(), AnyPlan: anyPlan}
}
