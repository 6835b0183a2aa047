package approvals

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/proxy/holdreq"
	"github.com/planlock/planlock/proxy/ledger"
)

// lifecycleForge is a scriptedForge that records the lifecycle calls.
type lifecycleForge struct {
	scriptedForge
	lmu    sync.Mutex
	events []string
	done   chan string
}

func (f *lifecycleForge) Ran(_ context.Context, h *gitapprove.HoldRequest, pr int, seq uint64, status string) error {
	return f.record(fmt.Sprintf("ran %s/%s #%d seq %d %s", h.PlanName, h.ID, pr, seq, status))
}

func (f *lifecycleForge) Retire(_ context.Context, h *gitapprove.HoldRequest, pr int, why string) error {
	return f.record(fmt.Sprintf("retire %s/%s #%d: %s", h.PlanName, h.ID, pr, why))
}

func (f *lifecycleForge) record(e string) error {
	f.lmu.Lock()
	f.events = append(f.events, e)
	f.lmu.Unlock()
	f.done <- e
	return nil
}

// A ran call is reported with its audit record; an expired hold is retired
// by the sweep once, and as superseded when its call is held again.
func TestHoldLifecycle(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	led, err := ledger.Open(t.Context(), ledger.Options{Dir: t.TempDir(), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	forge := &lifecycleForge{done: make(chan string, 16)}
	a, err := New(Config{Store: led, PRs: forge, OpenWait: time.Hour, Now: clock, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	wait := func() string {
		select {
		case e := <-forge.done:
			return e
		case <-time.After(time.Minute): // a bound on waiting, not a timing assertion
			t.Fatal("no lifecycle call")
			return ""
		}
	}

	held := a.Decide(t.Context(), req(`{"n":1}`))
	a.Ran(held.Hold, "refund-4711", 42, "ok")
	if e := wait(); e != "ran refund-4711/"+held.Hold.ID+" #7 seq 42 ok" {
		t.Errorf("ran: %q", e)
	}

	r := req(`{"n":2}`)
	r.Expires = clock().Add(time.Hour)
	first := a.Decide(t.Context(), r)
	if n := a.Sweep(t.Context()); n != 0 {
		t.Fatalf("swept %d holds before any expired", n)
	}
	advance(2 * time.Hour)
	if n := a.Sweep(t.Context()); n != 1 { // the first hold expires later
		t.Fatalf("swept %d holds, want 1", n)
	}
	if e := wait(); e != "retire refund-4711/"+first.Hold.ID+" #7: expired at 2026-11-30T13:00:00Z without being approved and used" {
		t.Errorf("retired: %q", e)
	}
	if n := a.Sweep(t.Context()); n != 0 {
		t.Errorf("the second sweep retired %d holds again", n)
	}

	// Held again after expiry: the new hold supersedes the old one.
	third := req(`{"n":3}`)
	third.Expires = clock().Add(time.Hour)
	old := a.Decide(t.Context(), third)
	advance(2 * time.Hour)
	third.Expires = clock().Add(time.Hour)
	renewed := a.Decide(t.Context(), third)
	if e := wait(); e != "retire refund-4711/"+old.Hold.ID+" #7: expired at 2026-11-30T15:00:00Z and is superseded by hold "+renewed.Hold.ID+" for the same call" {
		t.Errorf("superseded: %q", e)
	}
}

// reopenForge answers a reopened pull request and records Reopen.
type reopenForge struct {
	lifecycleForge
	reopened []string
}

func (f *reopenForge) Reopen(_ context.Context, old, hold *gitapprove.HoldRequest, pr int, _ *gitapprove.PinChange) (gitapprove.HoldPR, error) {
	f.reopened = append(f.reopened, fmt.Sprintf("%s→%s #%d", old.ID, hold.ID, pr))
	return gitapprove.HoldPR{Branch: old.Branch(), PR: &gitapprove.PR{Number: pr, State: gitapprove.PROpen}}, nil
}

// Decide on a refused hold whose pull request was reopened: a new pending
// hold takes the same pull request over; still closed, the refusal stands.
func TestDecideOnAReopenedPullRequest(t *testing.T) {
	led, err := ledger.Open(t.Context(), ledger.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	forge := &reopenForge{lifecycleForge: lifecycleForge{done: make(chan string, 16)}}
	a, err := New(Config{Store: led, PRs: forge, OpenWait: time.Hour, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	r := req(`{"n":9}`)
	first := a.Decide(t.Context(), r)
	closed := &gitapprove.PR{Number: 7, State: gitapprove.PRClosed}
	forge.setStatus(gitapprove.HoldStatus{State: gitapprove.HoldRejected, PR: closed}, nil)
	if d := a.Decide(t.Context(), r); d.Outcome != holdreq.Refused || !strings.Contains(d.Message, "rejected") {
		t.Fatalf("closed: %v %q", d.Outcome, d.Message)
	}
	if d := a.Decide(t.Context(), r); d.Outcome != holdreq.Refused || len(forge.reopened) != 0 {
		t.Fatalf("still closed: %v %q, reopened %v", d.Outcome, d.Message, forge.reopened)
	}
	forge.setStatus(gitapprove.HoldStatus{State: gitapprove.HoldPending, PR: &gitapprove.PR{Number: 7, State: gitapprove.PROpen}}, nil)
	d := a.Decide(t.Context(), r)
	if d.Outcome != holdreq.Held || d.Hold.ID == first.Hold.ID || d.Hold.PRURL != first.Hold.PRURL && d.Hold.PRURL != "https://github.example/acme/plans/pull/7" {
		t.Fatalf("reopened: %v %+v %q", d.Outcome, d.Hold, d.Message)
	}
	if len(forge.reopened) != 1 || forge.reopened[0] != first.Hold.ID+"→"+d.Hold.ID+" #7" {
		t.Errorf("Reopen calls: %v", forge.reopened)
	}
	if h, _ := led.GetHold(first.Hold.ID); h.State != ledger.HoldRejected {
		t.Errorf("the refused hold is %s, want it to stay rejected", h.State)
	}
}
