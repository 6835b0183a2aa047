package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/proxy/gate"
	"github.com/planlock/planlock/proxy/ledger"
)

// planState is one plan with what the proxy derives from it. It is replaced
// as a whole, never changed, except held (under heldMu), which belongs to
// this plan only: a new plan starts with no step on hold.
type planState struct {
	plan   *hclplan.Plan
	gate   *gate.Gate
	heldMu sync.Mutex
	held   map[int]string // step index → why the step is on hold (on_error = "hold"); under heldMu
	// shadow is observe mode's in-memory progress (observe.go).
	shadow *shadowProgress
}

// newPlanState builds the state of plan. A step put on hold by a failed
// call stays on hold across restarts (and reloads): its pending hold is in
// the durable state.
func (p *Proxy) newPlanState(plan *hclplan.Plan) *planState {
	st := &planState{plan: plan, gate: gate.New(plan), held: map[int]string{}, shadow: newShadow()}
	p.ostate.register(plan)
	for _, h := range p.cfg.State.ListHolds() {
		if h.PlanDigest == plan.Digest && h.State == ledger.HoldPending && holdCauses(h).Has(gate.CauseOnError) &&
			h.StepIndex >= 0 && h.StepIndex < len(plan.Steps) && plan.Steps[h.StepIndex].Name == h.Step {
			st.held[h.StepIndex] = h.Reason
		}
	}
	return st
}

// heldWhy says why step i is on hold, if it is.
func (st *planState) heldWhy(i int) (string, bool) {
	st.heldMu.Lock()
	defer st.heldMu.Unlock()
	why, ok := st.held[i]
	return why, ok
}

// setHeld puts step i on hold (why != "") or takes it off ("").
func (st *planState) setHeld(i int, why string) {
	st.heldMu.Lock()
	defer st.heldMu.Unlock()
	if why == "" {
		delete(st.held, i)
		return
	}
	st.held[i] = why
}

// Plan is the plan the proxy checks new calls against.
func (p *Proxy) Plan() *hclplan.Plan { return p.cur.Load().plan }

// SetPlan makes plan the one every new call is checked against, atomically;
// calls already running finish under the plan they started with. The plan
// must already be verified and admitted (no downgrade) by the caller; its
// digest keys its own counts, so a new plan starts from zero. tools/list
// shows the new plan's tools from now on, and clients are sent
// notifications/tools/list_changed.
func (p *Proxy) SetPlan(plan *hclplan.Plan) error {
	if plan == nil {
		return errors.New("proxy: SetPlan needs a plan")
	}
	cfg := p.cfg
	cfg.Plan, cfg.State = plan, p.ostate.State // the wrapped state's capabilities
	if err := checkCapabilities(cfg); err != nil {
		return err
	}
	p.cur.Store(p.newPlanState(plan))
	p.applyTools(nil, false)
	p.planChangedExtras()
	return nil
}

// placeholders are the planned tools with an open schema, shown until the
// upstream answers, so that a call gets a clear "upstream unavailable".
func (p *Proxy) placeholders(plan *hclplan.Plan) []server.ServerTool {
	var tools []server.ServerTool
	for _, name := range plan.Tools() {
		t := mcp.NewToolWithRawSchema(name, "(upstream not connected yet) "+limitsLine(plan, name), json.RawMessage(`{"type":"object"}`))
		tools = append(tools, server.ServerTool{Tool: t, Handler: p.handleCall})
	}
	return tools
}

type planKey struct{}

// withPlan pins the current plan for one call: its gate check, count, hold
// and answer all use the same plan even if SetPlan runs meanwhile.
func (p *Proxy) withPlan(ctx context.Context) (context.Context, *planState) {
	st := p.cur.Load()
	return context.WithValue(ctx, planKey{}, st), st
}

// current is the plan pinned by withPlan, else the current one.
func (p *Proxy) current(ctx context.Context) *planState {
	if st, ok := ctx.Value(planKey{}).(*planState); ok {
		return st
	}
	return p.cur.Load()
}
