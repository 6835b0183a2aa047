package planrun

import (
	"fmt"
	"strings"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/proxy"
)

// ObserveOptions are the operator's observe mode (--mode,
// --observe-step). A plan can never turn observing on: only these do.
type ObserveOptions struct {
	// Mode is "enforce" (or empty) or "observe".
	Mode string
	// Steps are observed in enforce mode: calls the plan refuses there are
	// forwarded, uncounted, and audited.
	Steps []string
	// AnyPlan (planlock serve, many plans) observes the Steps a plan has
	// and enforces the plan's others; without it, a step the plan lacks is
	// a usage error.
	AnyPlan bool
}

// Check refuses a mode that is neither and observe mode with steps.
func (o ObserveOptions) Check() error {
	switch o.Mode {
	case "", "enforce":
	case "observe":
		if len(o.Steps) > 0 {
			return usagef("--mode observe observes every step; --observe-step is for enforce mode")
		}
	default:
		return usagef("--mode %q: give enforce or observe", o.Mode)
	}
	return nil
}

// For is what the gate of plan observes; it warns loudly through log when
// anything is observed rather than enforced.
func (o ObserveOptions) For(plan *hclplan.Plan, log func(string)) (proxy.Observe, error) {
	var ob proxy.Observe
	if err := o.Check(); err != nil {
		return ob, err
	}
	ob.All = o.Mode == "observe"
	for _, s := range o.Steps {
		if plan.Step(s) != nil {
			ob.Steps = append(ob.Steps, s)
		} else if !o.AnyPlan {
			return ob, usagef("--observe-step %q: plan %q has no such step (it has %s)", s, plan.Name, stepNames(plan))
		}
	}
	switch {
	case ob.All:
		log(fmt.Sprintf("planlock: WARNING: observe mode: plan %q is NOT enforced. Every call the upstream offers is forwarded and counted against nothing; the audit log records what the plan would have decided (would_block, would_hold). For a rollout only.", plan.Name))
	case len(ob.Steps) > 0:
		log(fmt.Sprintf("planlock: WARNING: observing step(s) %s of plan %q: calls the plan refuses there are forwarded, uncounted, and only audited (would_block, would_hold)", strings.Join(ob.Steps, ", "), plan.Name))
	}
	return ob, nil
}

func stepNames(plan *hclplan.Plan) string {
	names := make([]string, len(plan.Steps))
	for i, s := range plan.Steps {
		names[i] = fmt.Sprintf("%q", s.Name)
	}
	return strings.Join(names, ", ")
}
