package proxy

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/proxy/gate"
	"github.com/planlock/planlock/proxy/ledger"
)

// Observe is the operator's observe setting. It is never read from a plan:
// a plan that could switch its own enforcement off would make its approval
// mean nothing.
type Observe struct {
	// All forwards every call the upstream offers and audits what the plan
	// would have decided (--mode observe). Nothing is counted in the state;
	// the would-be decisions follow an in-memory progress of their own.
	All bool
	// Steps are steps whose blocks and holds are audited and forwarded
	// instead (--observe-step); every other decision is enforced, and the
	// step's allowed calls are counted as usual.
	Steps []string
}

// Enabled reports whether anything is observed.
func (o Observe) Enabled() bool { return o.All || len(o.Steps) > 0 }

// checkObserve refuses an observe setting that cannot be carried out.
func checkObserve(cfg Config) error {
	if !cfg.Observe.Enabled() {
		return nil
	}
	if _, ok := cfg.State.(Observer); !ok {
		return fmt.Errorf("proxy: observe mode needs a state that records observed calls")
	}
	if cfg.Observe.All && len(cfg.Observe.Steps) > 0 {
		return fmt.Errorf("proxy: observe mode observes every step; do not also name steps")
	}
	for _, s := range cfg.Observe.Steps {
		if cfg.Plan.Step(s) == nil {
			return fmt.Errorf("proxy: observe step %q: plan %q has no such step", s, cfg.Plan.Name)
		}
	}
	return nil
}

// shadowProgress is observe mode's progress: what the state would hold had
// the plan been enforced, kept in memory only (per plan, see planState).
type shadowProgress struct {
	mu      sync.Mutex
	current int
	used    map[int]int
	done    map[int]bool
	held    map[int]string
}

func newShadow() *shadowProgress {
	return &shadowProgress{used: map[int]int{}, done: map[int]bool{}, held: map[int]string{}}
}

// snapshot is a copy that Decide may read without the lock.
type shadowSnapshot struct {
	current int
	used    map[int]int
	done    map[int]bool
}

func (s shadowSnapshot) Current() int    { return s.current }
func (s shadowSnapshot) Done(i int) bool { return s.done[i] }
func (s shadowSnapshot) Calls(i int) int { return s.used[i] }

func (s *shadowProgress) input(in *gate.Input) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := shadowSnapshot{current: s.current, used: make(map[int]int, len(s.used)), done: make(map[int]bool, len(s.done))}
	for k, v := range s.used {
		snap.used[k] = v
	}
	for k, v := range s.done {
		snap.done[k] = v
	}
	held := make(map[int]string, len(s.held))
	for k, v := range s.held {
		held[k] = v
	}
	in.Progress = snap
	in.OnErrorHeld = func(i int) (string, bool) { why, ok := held[i]; return why, ok }
	in.Hold = nil // observe mode makes no holds, so none binds
}

// take counts a call the plan would allow, rechecking order and max_calls
// under the lock as the ledger's Reserve does, so that concurrent observed
// calls are judged as enforced ones would be. A non-nil failure is what
// the plan would have decided instead.
func (s *shadowProgress) take(g *gate.Gate, step *hclplan.Step) *gate.Failure {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := shadowSnapshot{current: s.current, used: s.used, done: s.done}
	if f := g.Recheck(step, snap); f != nil {
		return f
	}
	s.used[step.Index]++
	s.current = max(s.current, step.Index)
	return nil
}

// record applies the outcome of a call take counted, as the ledger and
// the proxy would have (order progress, on_error).
func (s *shadowProgress) record(step *hclplan.Step, o ledger.Outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case o.OK:
		s.done[step.Index] = true
		delete(s.held, step.Index)
	case step.OnError == hclplan.ErrorHold:
		s.held[step.Index] = fmt.Sprintf("step %q %s (%s)", step.Name, onErrorHeld, o.Err)
	}
}

// observes reports whether the decision is observed rather than enforced.
func (p *Proxy) observes(d gate.Decision) bool {
	if p.cfg.Observe.All {
		return true
	}
	var step *hclplan.Step
	switch d.Kind {
	case gate.KindBlock:
		step = d.Block.Step
	case gate.KindHold:
		step = d.Hold.Step
	default:
		return false // allowed calls of an observed step are enforced and counted
	}
	return step != nil && slices.Contains(p.cfg.Observe.Steps, step.Name)
}

// observe carries out an observed decision: audit what the plan would have
// decided, then forward the call under an observed grant, uncounted. For a
// pinned step the plan would allow, the pin is read as the enforced path
// would, so that a changed pin shows as would_hold.
func (p *Proxy) observe(ctx context.Context, req mcp.CallToolRequest, st *planState, call ledger.Call, d gate.Decision) *mcp.CallToolResult {
	if ok, why := p.up.Ready(); !ok {
		note(ctx, call.Step, OutcomeNotSent, RuleUpstreamDown, 0)
		return errorResult(upstreamDown(why, "the call was not forwarded"))
	}
	var step *hclplan.Step
	decision, reason := ledger.WouldAllow, ""
	switch d.Kind {
	case gate.KindBlock:
		step, decision, reason = d.Block.Step, ledger.WouldBlock, d.Block.Reason
	case gate.KindHold:
		step, decision, reason = d.Hold.Step, ledger.WouldHold, d.Hold.Reason
		if d.Hold.Rejected != nil {
			// Observed calls ask no hold keeper: the rejection stands.
			decision, reason = ledger.WouldBlock, d.Hold.RejectedBlock().Reason
		}
	case gate.KindForward:
		step = d.Forward.Step
		if d.Forward.PinCheck {
			if r := p.readPin(ctx, step); r.reason != "" {
				decision, reason = ledger.WouldHold, r.reason
			}
		}
		if decision == ledger.WouldAllow && p.cfg.Observe.All {
			if f := st.shadow.take(st.gate, step); f != nil {
				decision, reason = ledger.WouldBlock, f.Reason
			}
		}
	}
	if step != nil {
		call.Step, call.StepIndex = step.Name, step.Index
	}
	if err := p.cfg.State.(Observer).Observe(context.WithoutCancel(ctx), call, decision, reason); err != nil {
		// Fail closed: an observed call that is not audited is not forwarded.
		return errorResult("planlock could not record the observed call, so it was not forwarded: " + stateError(err))
	}
	g := grant{call: call, step: step, observed: true, shadow: decision == ledger.WouldAllow && p.cfg.Observe.All}
	return p.forward(ctx, req, st, g, nil)
}
