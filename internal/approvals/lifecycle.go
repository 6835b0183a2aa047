package approvals

import (
	"context"
	"fmt"
	"time"

	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/internal/oneline"
	"github.com/planlock/planlock/proxy/holdreq"
	"github.com/planlock/planlock/proxy/ledger"
)

// Lifecycle keeps a hold's pull request in step with the hold:
// *gitapprove.Holds has it. A PRBackend without it leaves pull requests as
// they are.
type Lifecycle interface {
	// Ran says on the pull request that the approved call ran.
	Ran(ctx context.Context, hold *gitapprove.HoldRequest, prNumber int, auditSeq uint64, status string) error
	// Retire comments, closes the pull request and deletes the branch of a
	// hold that can no longer run.
	Retire(ctx context.Context, hold *gitapprove.HoldRequest, prNumber int, why string) error
}

// holdLister is a Store that lists its holds; *ledger.Ledger is one.
type holdLister interface {
	ListHolds() []ledger.Hold
}

// Ran reports that the approved call of hold h ran once, recorded in the
// audit log as record auditSeq with the upstream's status ("ok" or
// "error"). The comment is written in the background: the agent's answer
// does not wait for GitHub, and a failure is logged only.
func (a *Approvals) Ran(h ledger.Hold, planName string, auditSeq uint64, status string) {
	lc, ok := a.cfg.PRs.(Lifecycle)
	n := h.PR
	if !ok || n == 0 {
		return
	}
	a.background(func(ctx context.Context) {
		hr := &gitapprove.HoldRequest{ID: h.ID, PlanName: planName}
		if err := lc.Ran(ctx, hr, n, auditSeq, status); err != nil {
			fmt.Fprintf(a.cfg.Log, "planlock proxy: hold %s: telling %s that the call ran: %s\n", h.ID, h.PRURL, oneline.Of(err.Error(), 300))
		}
	})
}

// background runs fn with a bounded context unless Approvals is closing.
func (a *Approvals) background(fn func(ctx context.Context)) {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.bg.Add(1)
	a.mu.Unlock()
	go func() {
		defer a.bg.Done()
		ctx, cancel := context.WithTimeout(a.ctx, a.cfg.OpenTimeout)
		defer cancel()
		fn(ctx)
	}()
}

// notePlan remembers the plan name of a hold: the ledger does not keep it,
// and a hold's branch is named after it.
func (a *Approvals) notePlan(id, plan string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.plans == nil {
		a.plans = map[string]string{}
	}
	a.plans[id] = plan
}

// Sweep retires every expired hold whose pull request this process has not
// retired yet: a comment saying it expired, the pull request closed, its
// branch deleted. It returns how many it retired. Run by New every
// Config.SweepInterval.
func (a *Approvals) Sweep(ctx context.Context) int {
	lister, ok := a.cfg.Store.(holdLister)
	lc, ok2 := a.cfg.PRs.(Lifecycle)
	if !ok || !ok2 {
		return 0
	}
	n := 0
	for _, h := range lister.ListHolds() {
		if h.State != ledger.HoldExpired || h.PRURL == "" {
			continue
		}
		a.mu.Lock()
		done, plan := a.retired[h.ID], a.plans[h.ID]
		a.mu.Unlock()
		if done {
			continue
		}
		if plan == "" {
			// Opened before a restart: the plan name (and so the branch)
			// is unknown; the pull request is still commented and closed.
			plan = "unknown"
		}
		why := fmt.Sprintf("expired at %s without being approved and used", stamp(h.Expires))
		if err := lc.Retire(ctx, &gitapprove.HoldRequest{ID: h.ID, PlanName: plan}, h.PR, why); err != nil {
			fmt.Fprintf(a.cfg.Log, "planlock proxy: hold %s: retiring %s: %s (tried again later)\n", h.ID, h.PRURL, oneline.Of(err.Error(), 300))
			continue
		}
		a.mu.Lock()
		if a.retired == nil {
			a.retired = map[string]bool{}
		}
		a.retired[h.ID] = true
		a.mu.Unlock()
		n++
	}
	return n
}

// supersede retires an older hold of the same call that a new hold replaces.
func (a *Approvals) supersede(old ledger.Hold, planName, newID string) {
	lc, ok := a.cfg.PRs.(Lifecycle)
	if !ok || old.PRURL == "" || old.State != ledger.HoldExpired {
		return
	}
	a.background(func(ctx context.Context) {
		why := fmt.Sprintf("expired at %s and is superseded by hold %s for the same call", stamp(old.Expires), newID)
		if err := lc.Retire(ctx, &gitapprove.HoldRequest{ID: old.ID, PlanName: planName}, old.PR, why); err != nil {
			fmt.Fprintf(a.cfg.Log, "planlock proxy: hold %s: retiring %s: %s\n", old.ID, old.PRURL, oneline.Of(err.Error(), 300))
			return
		}
		a.mu.Lock()
		if a.retired == nil {
			a.retired = map[string]bool{}
		}
		a.retired[old.ID] = true
		a.mu.Unlock()
	})
}

// sweepLoop runs Sweep every interval until Close.
func (a *Approvals) sweepLoop(interval time.Duration) {
	defer a.bg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-t.C:
			a.Sweep(a.ctx)
		}
	}
}

// Ran implements Lifecycle for a lazily made PRBackend.
func (l *lazy) Ran(ctx context.Context, hold *gitapprove.HoldRequest, prNumber int, auditSeq uint64, status string) error {
	f, err := l.get(ctx)
	if err != nil {
		return err
	}
	if lc, ok := f.(Lifecycle); ok {
		return lc.Ran(ctx, hold, prNumber, auditSeq, status)
	}
	return nil
}

// Retire implements Lifecycle for a lazily made PRBackend.
func (l *lazy) Retire(ctx context.Context, hold *gitapprove.HoldRequest, prNumber int, why string) error {
	f, err := l.get(ctx)
	if err != nil {
		return err
	}
	if lc, ok := f.(Lifecycle); ok {
		return lc.Retire(ctx, hold, prNumber, why)
	}
	return nil
}

// Reopener carries a reopened pull request over to a new hold;
// *gitapprove.Holds has it.
type Reopener interface {
	Reopen(ctx context.Context, old, hold *gitapprove.HoldRequest, prNumber int, pin *gitapprove.PinChange) (gitapprove.HoldPR, error)
}

// reopened handles a refused hold whose pull request a person reopened, as
// GitHub users expect: the call is pending again, on the same pull request.
// The ledger keeps the refusal of the old hold (its record is final); a new
// hold for the call takes over the pull request. ok=false: the pull request
// is still closed (or cannot be asked), so the refusal stands.
func (a *Approvals) reopened(ctx context.Context, r holdreq.Request, old ledger.Hold) (decision, bool) {
	ro, ok := a.cfg.PRs.(Reopener)
	n := old.PR
	if !ok || n == 0 {
		return decision{}, false
	}
	cctx, cancel := context.WithTimeout(ctx, a.cfg.CheckTimeout)
	defer cancel()
	st, err := a.cfg.PRs.Status(cctx, request(r, old), n)
	if err != nil || st.State != gitapprove.HoldPending || st.PR == nil || st.PR.State != gitapprove.PROpen {
		return decision{}, false
	}
	nh, err := a.cfg.Store.NewHold(context.WithoutCancel(ctx), r.Call, ledger.HoldSpec{Reason: r.Reason, Cause: r.Cause, ObservedPin: r.ObservedPin, Expires: r.Expires})
	if err != nil {
		return decision{Outcome: holdreq.Refused, Hold: old, Message: fmt.Sprintf("pull request %s was reopened, but planlock could not record a new hold (%v); the call was not forwarded", old.PRURL, oneline.Of(err.Error(), 300))}, true
	}
	a.notePlan(nh.ID, r.PlanName)
	var pin *gitapprove.PinChange
	if r.ObservedPin != "" && a.cfg.PlanPath != "" {
		pin = &gitapprove.PinChange{PlanPath: a.cfg.PlanPath}
	}
	octx, ocancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.OpenTimeout)
	defer ocancel()
	if _, err := ro.Reopen(octx, request(r, old), request(r, nh), n, pin); err != nil {
		return decision{Outcome: holdreq.Refused, Hold: nh, Message: fmt.Sprintf(
			"held: %s; pull request %s was reopened, but moving it to hold %s failed (%s). The hold is kept; repeat exactly the same call later.", r.Reason, old.PRURL, nh.ID, oneline.Of(err.Error(), 300))}, true
	}
	nh, err = a.cfg.Store.UpdateHold(context.WithoutCancel(ctx), nh.ID, ledger.HoldUpdate{PRURL: old.PRURL, PR: old.PR, Note: fmt.Sprintf("pull request reopened: it now asks for this hold instead of the refused hold %s", old.ID)})
	if err != nil {
		return decision{Outcome: holdreq.Refused, Hold: nh, Message: fmt.Sprintf("pull request %s was reopened, but recording it failed: %s; repeat exactly the same call later", old.PRURL, oneline.Of(err.Error(), 300))}, true
	}
	return pending(nh, false), true
}

// Reopen implements Reopener for a lazily made PRBackend.
func (l *lazy) Reopen(ctx context.Context, old, hold *gitapprove.HoldRequest, prNumber int, pin *gitapprove.PinChange) (gitapprove.HoldPR, error) {
	f, err := l.get(ctx)
	if err != nil {
		return gitapprove.HoldPR{}, err
	}
	ro, ok := f.(Reopener)
	if !ok {
		return gitapprove.HoldPR{}, fmt.Errorf("the forge cannot carry a reopened pull request over")
	}
	return ro.Reopen(ctx, old, hold, prNumber, pin)
}
