package planrun

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/testkit/pgtest"
	"github.com/planlock/planlock/proxy"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/proxy/ledger/pgstate"
	"github.com/planlock/planlock/proxy/planload"
)

const testPlan = `plan "p" {
  goal  = "echo"
  order = "any"
  step "say" {
    tool = "echo"
  }
  step "shout" {
    tool = "echo_loud"
  }
}
`

func parse(t *testing.T) *hclplan.Plan {
	t.Helper()
	p, diags := hclplan.Parse("p.hcl", []byte(testPlan))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return p
}

// TestObserveFor: the observe flags as proxy (one plan: a step it lacks
// is a usage error) and serve (any plan: observed where the plan has it)
// read them.
func TestObserveFor(t *testing.T) {
	plan := parse(t)
	for _, tc := range []struct {
		name      string
		o         ObserveOptions
		all       bool
		steps     []string
		usage     string // the usage error, "" for none
		warnWords string // in the start warning, "" for none
	}{
		{name: "default enforces", o: ObserveOptions{}},
		{name: "enforce", o: ObserveOptions{Mode: "enforce"}},
		{name: "observe", o: ObserveOptions{Mode: "observe"}, all: true, warnWords: `observe mode: plan "p" is NOT enforced`},
		{name: "steps", o: ObserveOptions{Steps: []string{"shout"}}, steps: []string{"shout"}, warnWords: `observing step(s) shout of plan "p"`},
		{name: "unknown mode", o: ObserveOptions{Mode: "watch"}, usage: `--mode "watch": give enforce or observe`},
		{name: "observe with steps", o: ObserveOptions{Mode: "observe", Steps: []string{"say"}}, usage: "--mode observe observes every step"},
		{name: "a step the plan lacks", o: ObserveOptions{Steps: []string{"nope"}}, usage: `--observe-step "nope": plan "p" has no such step (it has "say", "shout")`},
		{name: "any plan: the steps it has", o: ObserveOptions{Steps: []string{"nope", "say"}, AnyPlan: true}, steps: []string{"say"}, warnWords: "observing step(s) say"},
		{name: "any plan: none of them", o: ObserveOptions{Steps: []string{"nope"}, AnyPlan: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var warned []string
			ob, err := tc.o.For(plan, func(s string) { warned = append(warned, s) })
			if tc.usage != "" {
				if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.usage) {
					t.Fatalf("err %v, want a usage error %q", err, tc.usage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ob.All != tc.all || !slices.Equal(ob.Steps, tc.steps) {
				t.Errorf("observe %+v, want all %v steps %v", ob, tc.all, tc.steps)
			}
			if got := strings.Join(warned, "\n"); (tc.warnWords == "") != (got == "") || !strings.Contains(got, tc.warnWords) {
				t.Errorf("warned %q, want %q", got, tc.warnWords)
			}
		})
	}
}

// TestOpenAndClose: a gate on a state directory with holds kept in the
// state serves its plan; Close closes the state (it can be opened again)
// and a second Close does nothing.
func TestOpenAndClose(t *testing.T) {
	ctx := context.Background()
	plan := parse(t)
	loaded := &planload.Loaded{Plan: plan, File: filepath.Join(t.TempDir(), "p.hcl")}
	root := t.TempDir()
	o := Options{State: StateOptions{Root: root}, Holds: HoldOptions{NoPRs: true},
		Upstream: upstreamForTest()}
	for range 2 {
		g, err := Open(ctx, loaded, o)
		if err != nil {
			t.Fatal(err)
		}
		if g.Proxy.Plan().Digest != plan.Digest {
			t.Errorf("the gate serves %s, want %s", g.Proxy.Plan().Digest, plan.Digest)
		}
		if !strings.HasPrefix(g.State.Dir(), root) {
			t.Errorf("state in %s, want under %s", g.State.Dir(), root)
		}
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
		if err := g.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	}
}

// upstreamForTest names an upstream that is never started: the tests
// serve no call.
func upstreamForTest() proxy.UpstreamConfig {
	return proxy.UpstreamConfig{URL: "http://127.0.0.1:9/mcp"}
}

// TestPlansShareAPostgresState: two plans' gates on one PostgreSQL
// database (planlock serve with --state postgres://, or two proxies of
// different plans) keep their counts apart by plan digest, as always; what
// lists the state's holds (hold approvals' sweep of expired pull requests,
// the pending-holds gauge) sees each gate's own plan only, also after a
// reload to a new version of the plan.
func TestPlansShareAPostgresState(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Start(t).NewDatabase(t)
	if _, _, err := pgstate.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	open := func(name string) (*Gate, *hclplan.Plan) {
		p, diags := hclplan.Parse(name+".hcl", []byte(strings.Replace(testPlan, `plan "p"`, `plan "`+name+`"`, 1)))
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		g, err := Open(ctx, &planload.Loaded{Plan: p, File: filepath.Join(t.TempDir(), name+".hcl")},
			Options{State: StateOptions{State: url, Root: t.TempDir()}, Holds: HoldOptions{NoPRs: true}, Upstream: upstreamForTest()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		return g, p
	}
	ga, pa := open("a")
	gb, pb := open("b")
	hold := func(g *Gate, p *hclplan.Plan) ledger.Hold {
		h, err := g.State.NewHold(ctx, ledger.Call{PlanDigest: p.Digest, Tool: "echo", Args: []byte(`{}`), Step: "say"},
			ledger.HoldSpec{Reason: "approval", Expires: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	ids := func(g *Gate) (out []string) {
		for _, h := range g.State.ListHolds() {
			out = append(out, h.ID)
		}
		return out
	}
	hb := hold(gb, pb)
	ha := hold(ga, pa)
	if got := ids(ga); !slices.Equal(got, []string{ha.ID}) {
		t.Errorf("plan a's gate lists holds %v, want only its own %s", got, ha.ID)
	}
	if got := ids(gb); !slices.Equal(got, []string{hb.ID}) {
		t.Errorf("plan b's gate lists holds %v, want only its own %s", got, hb.ID)
	}
	// A new version of plan a, swapped in as the reloader does: the holds
	// of both versions are a's.
	pa2, diags := hclplan.Parse("a.hcl", []byte(strings.Replace(strings.Replace(testPlan, `plan "p"`, `plan "a"`, 1), `goal  = "echo"`, `goal  = "echo, v2"`, 1)))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if err := ga.swap(pa2); err != nil {
		t.Fatal(err)
	}
	ha2 := hold(ga, pa2)
	if got := ids(ga); !slices.Equal(got, []string{ha.ID, ha2.ID}) {
		t.Errorf("plan a's gate after a reload lists holds %v, want %s and %s", got, ha.ID, ha2.ID)
	}
	if got := ids(gb); !slices.Equal(got, []string{hb.ID}) {
		t.Errorf("plan b's gate lists holds %v, want only its own %s", got, hb.ID)
	}
}
