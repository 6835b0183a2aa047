// Package planrun takes one loaded plan and the operator's options to a
// running gate: its state (a state directory or PostgreSQL), the approval
// of held calls (pull requests or the state), observe mode, telemetry, the
// proxy, and the reloader that swaps in a newer verified plan. planlock
// proxy runs one gate; planlock serve (internal/gateway) one per plan file.
// Both build their gates here, so a feature of one is a feature of both.
package planrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/telemetry"
	"github.com/planlock/planlock/proxy"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/proxy/planload"
)

// ErrUsage marks an error of the operator's options (a command's exit 2).
var ErrUsage = errors.New("usage error")

type usageError struct{ msg string }

func (e *usageError) Error() string        { return e.msg }
func (e *usageError) Is(target error) bool { return target == ErrUsage }

func usagef(format string, a ...any) error { return &usageError{msg: fmt.Sprintf(format, a...)} }

// Options are everything a gate is built from besides the loaded plan.
type Options struct {
	State   StateOptions
	Holds   HoldOptions
	Observe ObserveOptions
	// Upstream is the plan's upstream.
	Upstream proxy.UpstreamConfig

	CallTimeout     time.Duration
	MaxMessageBytes int
	Version         string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Observer, when set, is told what became of every call.
	Observer proxy.CallObserver
	// Holds, when set, reads the plan's open holds (metrics).
	WatchHolds func(plan string, holds telemetry.HoldLister) (stop func())

	// Reload watches the plan file; a zero Interval never reloads.
	Reload Reload

	// Log gets the gate's one-line notices; LogWriter the proxy's lines.
	Log       func(string)
	LogWriter io.Writer
}

// Reload is how a running gate follows its plan file.
type Reload struct {
	Source   planload.Source
	Interval time.Duration
	// Accept refuses a newer plan the running gate cannot serve (another
	// upstream, another name); nil accepts one with the same upstream.
	Accept func(*hclplan.Plan) error
	// Sync, when set, copies the plan from its repository next to the
	// reloader every SyncInterval (planload.RepoSync).
	Sync interface {
		Run(context.Context, time.Duration)
	}
	SyncInterval time.Duration
}

// Gate is one plan's running gate. Serve it with Proxy; Close it after.
type Gate struct {
	Proxy *proxy.Proxy
	State State

	approver Approver
	unwatch  func()
	stop     context.CancelFunc
	done     []chan struct{}
}

// Open builds the gate of loaded: opens its state, admits the plan (no
// downgrade), sets up hold approvals and the proxy, and starts the
// reloader, which runs until ctx ends or Close. Errors are one line;
// those of the options wrap ErrUsage.
func Open(ctx context.Context, loaded *planload.Loaded, o Options) (g *Gate, err error) {
	log := o.Log
	if log == nil {
		log = func(string) {}
	}
	plan := loaded.Plan
	observe, err := o.Observe.For(plan, log)
	if err != nil {
		return nil, err
	}
	g = &Gate{}
	defer func() {
		if err != nil {
			g.Close()
			g = nil
		}
	}()
	var key *ledger.StateKey
	if g.State, key, err = openState(ctx, loaded, o.State); err != nil {
		return g, err
	}
	// The multi-round requestState key: the state key's, else the local
	// directory's own (proxy.RoundKey).
	roundKey, err := proxy.RoundKey(key, g.State.Dir())
	if err != nil {
		return g, err
	}
	if err := planload.Admit(ctx, g.State, loaded); err != nil {
		return g, err
	}
	if g.approver, err = OpenApprovals(ctx, o.Holds, g.State); err != nil {
		return g, err
	}
	g.Proxy, err = proxy.New(proxy.Config{Plan: plan, State: g.State, Upstream: o.Upstream, CallTimeout: o.CallTimeout,
		MaxMessageBytes: o.MaxMessageBytes, Log: o.LogWriter, Version: o.Version, Now: o.Now,
		Approvals: g.approver, Observe: observe, Observer: o.Observer, RoundKey: roundKey})
	if err != nil {
		return g, err
	}
	if o.WatchHolds != nil {
		g.unwatch = o.WatchHolds(plan.Name, g.State)
	}
	rctx, stop := context.WithCancel(ctx)
	g.stop = stop
	r := o.Reload
	if r.Interval <= 0 {
		if r.Sync != nil {
			log("planlock: --reload-interval 0: the plan is fetched from the repository at start only")
		}
		return g, nil
	}
	accept := r.Accept
	if accept == nil {
		up := plan.Upstream
		accept = func(p *hclplan.Plan) error {
			if !SameUpstream(up, p.Upstream) {
				return fmt.Errorf("plan %q names another upstream than the running one; restart the proxy to change the upstream", p.Name)
			}
			return nil
		}
	}
	rl := &planload.Reloader{Source: r.Source, State: g.State, Interval: r.Interval, Now: o.Now, Accept: accept,
		Swap: func(n *planload.Loaded) error { return g.swap(n.Plan) }, Log: log}
	g.goRun(func() { rl.Run(rctx, loaded) })
	if r.Sync != nil {
		// Copies what the repository's branches hold next to the
		// reloader, which verifies it as any changed plan file.
		g.goRun(func() { r.Sync.Run(rctx, r.SyncInterval) })
	}
	return g, nil
}

// swap serves plan from now on; a state shared with other plans counts
// its holds as this gate's too (pgStore).
func (g *Gate) swap(plan *hclplan.Plan) error {
	if s, ok := g.State.(pgStore); ok {
		s.scope.add(plan.Digest)
	}
	return g.Proxy.SetPlan(plan)
}

func (g *Gate) goRun(f func()) {
	done := make(chan struct{})
	g.done = append(g.done, done)
	go func() { defer close(done); f() }()
}

// Stop ends the reloader (and the repository sync) and waits for them.
func (g *Gate) Stop() {
	if g.stop != nil {
		g.stop()
	}
	for _, d := range g.done {
		<-d
	}
	g.done = nil
}

// Close stops the gate's background work, then closes the hold approvals
// and the state, so that every outcome is written. The proxy must be done
// serving.
func (g *Gate) Close() error {
	g.Stop()
	if g.unwatch != nil {
		g.unwatch()
		g.unwatch = nil
	}
	if g.approver != nil {
		g.approver.Close() // before the state closes
		g.approver = nil
	}
	if g.State == nil {
		return nil
	}
	err := g.State.Close()
	g.State = nil
	return err
}

// SameUpstream reports whether two upstream blocks name the same upstream.
func SameUpstream(a, b *hclplan.Upstream) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.Equal(a.Command, b.Command) && a.URL == b.URL && slices.Equal(a.Env, b.Env)
}
