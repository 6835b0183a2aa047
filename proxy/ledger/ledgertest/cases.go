package ledgertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/planlock/planlock/proxy/ledger"
)

// steps is how many steps the comparisons look at.
const steps = 6

func diffProgress(got, want ledger.Progress) string {
	if got.Current != want.Current {
		return fmt.Sprintf("current step %d, want %d", got.Current, want.Current)
	}
	for i := range steps {
		if got.Calls(i) != want.Calls(i) || got.Done(i) != want.Done(i) || got.Held(i) != want.Held(i) {
			return fmt.Sprintf("step %d: calls %d done %v held %v, want calls %d done %v held %v",
				i, got.Calls(i), got.Done(i), got.Held(i), want.Calls(i), want.Done(i), want.Held(i))
		}
	}
	return ""
}

func diffHold(got, want ledger.Hold) string {
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		return fmt.Sprintf("%s, want %s", g, w)
	}
	return ""
}

// errCheck is what a reservation's order check refuses with.
var errCheck = errors.New("order rule refused")

var cases = []struct {
	name string
	run  func(h *harness)
}{
	{"max_calls", func(h *harness) {
		ts := h.reserve(0, 3, 3)
		for n, tk := range ts {
			if tk.Used != n+1 || tk.PlanDigest != digest || tk.Step != stepName(0) || tk.StepIndex != 0 || tk.Tool != "refund" || !tk.At.Equal(start) {
				h.Fatalf("ticket %d: %+v", n, tk)
			}
		}
		_, err := h.S.Reserve(ctx, rv(0, 3, `{"id":1}`))
		var ex *ledger.ExhaustedError
		if !errors.As(err, &ex) || !errors.Is(err, ledger.ErrExhausted) || ex.Used != 3 || ex.Max != 3 || ex.Step != stepName(0) || ex.PlanDigest != digest {
			h.Fatalf("fourth call of max_calls 3: %v (%+v)", err, ex)
		}
		h.calls(0, 3)
		h.reserve(1, 1, 1) // another step counts apart
		h.calls(1, 1)
		h.Restart()
		h.calls(0, 3)
		if _, err := h.S.Reserve(ctx, rv(0, 3, `{"id":1}`)); !errors.Is(err, ledger.ErrExhausted) {
			h.Fatalf("after a restart: %v", err)
		}
		// A larger max_calls for the same step (a new plan version with the
		// same digest cannot have one; the count is the step's).
		h.reserve(0, 4, 1)
		h.calls(0, 4)
	}},
	{"max_calls in leases", func(h *harness) {
		// 250 calls: counted in leases while 200 are left, one by one after.
		const max = 250
		for n := 1; n <= max; n++ {
			tk, err := h.S.Reserve(ctx, rv(0, max, `{"id":1}`))
			if err != nil {
				h.Fatalf("call %d: %v", n, err)
			}
			if tk.Used != n {
				h.Fatalf("call %d: ticket used %d", n, tk.Used)
			}
		}
		if _, err := h.S.Reserve(ctx, rv(0, max, `{"id":1}`)); !errors.Is(err, ledger.ErrExhausted) {
			h.Fatalf("call %d: %v", max+1, err)
		}
		h.calls(0, max)
		h.Restart()
		h.calls(0, max)
	}},
	{"max_calls changed", func(h *harness) {
		// A reloaded plan may give a step another max_calls: what is
		// counted stays, a lease taken under the old one is no excuse.
		h.reserve(0, 1000, 2)
		for n := 3; n <= 4; n++ {
			if tk := h.reserve(0, 4, 1)[0]; tk.Used != n {
				h.Fatalf("call %d under max_calls 4: ticket %d", n, tk.Used)
			}
		}
		if _, err := h.S.Reserve(ctx, rv(0, 4, `{}`)); !errors.Is(err, ledger.ErrExhausted) {
			h.Fatalf("past the lowered max_calls: %v", err)
		}
		h.calls(0, 4)
		if tk := h.reserve(0, 1000, 1)[0]; tk.Used != 5 {
			h.Fatalf("under the raised max_calls again: ticket %d", tk.Used)
		}
		h.Restart()
		h.calls(0, 5)
	}},
	{"invalid reservations", func(h *harness) {
		for name, r := range map[string]ledger.Reservation{
			"max_calls 0":        rv(0, 0, `{}`),
			"negative step":      {Call: ledger.Call{PlanDigest: digest, Step: "x", StepIndex: -1, Tool: "refund"}, MaxCalls: 5},
			"over limit no hold": {Call: call(0, `{}`), MaxCalls: 5, OverLimit: true},
		} {
			if _, err := h.S.Reserve(ctx, r); !errors.Is(err, ledger.ErrInvalidArgument) {
				h.Fatalf("%s: %v, want ErrInvalidArgument", name, err)
			}
		}
		h.calls(0, 0)
		// Arguments that are not JSON take no count, in a lease or not.
		for _, max := range []int{3, 1000} {
			i := 1
			if max == 1000 {
				i = 2
			}
			h.reserve(i, max, 1)
			if _, err := h.S.Reserve(ctx, rv(i, max, `{"id":`)); err == nil {
				h.Fatalf("max_calls %d: arguments that are not JSON were reserved", max)
			}
			tk := h.reserve(i, max, 1)[0]
			if tk.Used != 2 {
				h.Fatalf("max_calls %d: the call after refused arguments is call %d, want 2", max, tk.Used)
			}
			h.calls(i, 2)
		}
	}},
	{"refusal order", func(h *harness) {
		// Arguments no record can hold refuse the call before any rule:
		// the order check, max_calls, the hold.
		h.reserve(0, 1, 1)
		bad := rv(0, 1, `{"id":`)
		bad.Check = func(ledger.Progress) error { return errCheck }
		if _, err := h.S.Reserve(ctx, bad); !errors.Is(err, ledger.ErrInvalidArgument) {
			h.Fatalf("arguments that are not JSON, check refusing: %v", err)
		}
		bad.Check = nil
		if _, err := h.S.Reserve(ctx, bad); !errors.Is(err, ledger.ErrInvalidArgument) {
			h.Fatalf("arguments that are not JSON, step used up: %v", err)
		}
		bad.HoldID = "0000"
		if _, err := h.S.Reserve(ctx, bad); !errors.Is(err, ledger.ErrInvalidArgument) {
			h.Fatalf("arguments that are not JSON, unknown hold: %v", err)
		}
		// Then the order check, then max_calls, then the hold.
		r := rv(0, 1, `{}`)
		r.HoldID = "0000"
		r.Check = func(ledger.Progress) error { return errCheck }
		if _, err := h.S.Reserve(ctx, r); err != errCheck {
			h.Fatalf("check refusing, step used up, unknown hold: %v", err)
		}
		r.Check = nil
		if _, err := h.S.Reserve(ctx, r); !errors.Is(err, ledger.ErrExhausted) {
			h.Fatalf("step used up, unknown hold: %v", err)
		}
		r.OverLimit = true
		if _, err := h.S.Reserve(ctx, r); !errors.Is(err, ledger.ErrUnknownHold) {
			h.Fatalf("over the limit, unknown hold: %v", err)
		}
		h.calls(0, 1)
	}},
	{"order check", func(h *harness) {
		// The Progress a check gets is valid only during the check.
		var calls, current int
		r := rv(0, 1000, `{"id":1}`)
		r.Check = func(p ledger.Progress) error { calls, current = p.Calls(0), p.Current; return nil }
		for range 2 {
			if _, err := h.S.Reserve(ctx, r); err != nil {
				h.Fatal(err)
			}
		}
		if calls != 1 || current != 0 {
			h.Fatalf("second call's check saw calls %d current %d, want 1 and 0", calls, current)
		}
		r.Check = func(ledger.Progress) error { return errCheck }
		if _, err := h.S.Reserve(ctx, r); err != errCheck {
			h.Fatalf("refused by the check: %v, want its error unchanged", err)
		}
		h.calls(0, 2)
		r3 := rv(3, 5, `{}`)
		r3.Check = func(ledger.Progress) error { return errCheck }
		if _, err := h.S.Reserve(ctx, r3); err != errCheck {
			h.Fatalf("refused by the check: %v", err)
		}
		if p := h.S.Progress(digest); p.Current != 0 || p.Calls(3) != 0 {
			h.Fatalf("a refused call moved the order: current %d, calls %d", p.Current, p.Calls(3))
		}
		// The order rule comes before max_calls.
		h.reserve(4, 1, 1)
		r4 := rv(4, 1, `{}`)
		r4.Check = func(ledger.Progress) error { return errCheck }
		if _, err := h.S.Reserve(ctx, r4); err != errCheck {
			h.Fatalf("exhausted step refused by the check: %v, want the check's error", err)
		}
	}},
	{"current step", func(h *harness) {
		h.reserve(0, 1000, 1)
		if p := h.S.Progress(digest); p.Current != 0 || p.Done(0) {
			h.Fatalf("after step 0: current %d done %v", p.Current, p.Done(0))
		}
		tk := h.reserve(2, 1000, 1)[0]
		h.reserve(1, 1000, 1) // the gate decides whether that may be; the count is taken
		if p := h.S.Progress(digest); p.Current != 2 {
			h.Fatalf("after step 2 and 1: current %d, want 2", p.Current)
		}
		if err := h.S.Complete(ctx, tk, ledger.Outcome{OK: true}); err != nil {
			h.Fatal(err)
		}
		r := rv(2, 1000, `{}`)
		var done bool
		var calls, current int
		r.Check = func(p ledger.Progress) error { done, calls, current = p.Done(2), p.Calls(2), p.Current; return nil }
		if _, err := h.S.Reserve(ctx, r); err != nil {
			h.Fatal(err)
		}
		if !done || calls != 1 || current != 2 {
			h.Fatalf("the check after a success saw done %v calls %d current %d", done, calls, current)
		}
		// A success counts once Complete returns, whichever call of the
		// step it was (in a lease or not): the next call's order rule
		// sees it.
		ts := h.reserve(3, 1000, 3)
		if err := h.S.Complete(ctx, ts[2], ledger.Outcome{OK: true}); err != nil {
			h.Fatal(err)
		}
		if p := h.S.Progress(digest); !p.Done(3) || p.Current != 3 {
			h.Fatalf("after the third call's success: done %v current %d", p.Done(3), p.Current)
		}
		r4 := rv(4, 1000, `{}`)
		r4.Check = func(p ledger.Progress) error { done = p.Done(3); return nil }
		if _, err := h.S.Reserve(ctx, r4); err != nil || !done {
			h.Fatalf("the next step's check after a success: done %v, %v", done, err)
		}
		h.Restart()
		if p := h.S.Progress(digest); p.Current != 4 || !p.Done(2) || !p.Done(3) || p.Done(0) || p.Calls(2) != 2 {
			h.Fatalf("after a restart: current %d done %v/%v calls %d", p.Current, p.Done(2), p.Done(0), p.Calls(2))
		}
	}},
	{"outcomes", func(h *harness) {
		ts := h.reserve(0, 1000, 3)
		ts = append(ts, h.reserve(1, 2, 1)...)
		if err := h.S.Complete(ctx, ts[0], ledger.Outcome{OK: false, Err: "upstream said no\nsecond line"}); err != nil {
			h.Fatal(err)
		}
		if p := h.S.Progress(digest); p.Done(0) {
			h.Fatal("a failed call marked its step done")
		}
		if err := h.S.Complete(ctx, ts[1], ledger.Outcome{OK: true, Latency: 1500 * time.Microsecond}); err != nil {
			h.Fatal(err)
		}
		if err := h.S.Complete(ctx, ts[3], ledger.Outcome{OK: true}); err != nil {
			h.Fatal(err)
		}
		if p := h.S.Progress(digest); !p.Done(0) || !p.Done(1) || p.Calls(0) != 3 {
			h.Fatalf("after the outcomes: done %v/%v calls %d", p.Done(0), p.Done(1), p.Calls(0))
		}
		if err := h.S.Block(ctx, call(3, `{"id":2}`), "not in the plan"); err != nil {
			h.Fatal(err)
		}
		if err := h.S.Observe(ctx, call(4, `{"id":3}`), ledger.WouldBlock, "observe mode"); err != nil {
			h.Fatal(err)
		}
		if err := h.S.Observe(ctx, call(4, `{}`), "maybe", "observe mode"); !errors.Is(err, ledger.ErrInvalidArgument) {
			h.Fatalf("observe decision maybe: %v", err)
		}
		if p := h.S.Progress(digest); p.Calls(3) != 0 || p.Calls(4) != 0 || p.Current != 1 {
			h.Fatalf("a block or an observed call counted: calls %d/%d current %d", p.Calls(3), p.Calls(4), p.Current)
		}
		h.Restart()
		if p := h.S.Progress(digest); !p.Done(0) || !p.Done(1) || p.Calls(0) != 3 || p.Calls(3) != 0 {
			h.Fatalf("after a restart: done %v/%v calls %d/%d", p.Done(0), p.Done(1), p.Calls(0), p.Calls(3))
		}
		h.S.Close()
		recs := records(h, h.b.Journal(h.T))
		h.S = h.b.Open(h.T, h.clk.Now)
		var outcomes, blocks, observed []map[string]any
		allows := map[float64]map[string]any{}
		for _, r := range recs {
			switch {
			case r["type"] == "outcome":
				outcomes = append(outcomes, r)
			case r["type"] == "decision" && r["decision"] == "block":
				blocks = append(blocks, r)
			case r["type"] == "observe":
				observed = append(observed, r)
			case r["type"] == "decision" && r["decision"] == "allow":
				allows[r["seq"].(float64)] = r
			}
		}
		if len(outcomes) != 3 || len(blocks) != 1 || len(observed) != 1 {
			h.Fatalf("%d outcome, %d block, %d observe records; want 3, 1, 1", len(outcomes), len(blocks), len(observed))
		}
		if o := outcomes[0]; o["ok"] != false || o["error"] != "upstream said no …" || o["step"] != stepName(0) {
			h.Fatalf("failed outcome record: %v", o)
		}
		if o := outcomes[1]; o["ok"] != true || o["latency_ms"] != 1.5 {
			h.Fatalf("outcome record: %v", o)
		}
		for _, o := range outcomes {
			a := allows[o["ref"].(float64)]
			if a == nil || a["step"] != o["step"] {
				h.Fatalf("outcome record %v refers to no allow record of its step", o)
			}
		}
		if b := blocks[0]; b["reason"] != "not in the plan" || b["caller"] != "token:ci" || b["step_index"] != 3.0 {
			h.Fatalf("block record: %v", b)
		}
		if o := observed[0]; o["decision"] != ledger.WouldBlock || o["reason"] != "observe mode" {
			h.Fatalf("observe record: %v", o)
		}
	}},
	{"on_error hold", func(h *harness) {
		tk := h.reserve(1, 1000, 1)[0]
		if err := h.S.Complete(ctx, tk, ledger.Outcome{OK: false, Err: "boom", HoldStep: true}); err != nil {
			h.Fatal(err)
		}
		if p := h.S.Progress(digest); !p.Held(1) || p.Done(1) {
			h.Fatalf("step on hold: held %v done %v", p.Held(1), p.Done(1))
		}
		h.Crash() // an outcome that holds its step is durable on return
		if p := h.S.Progress(digest); !p.Held(1) {
			h.Fatal("the step's hold did not survive a crash")
		}
		// Calls of a held step are still counted when the gate lets them
		// through; only a reservation that consumes a hold lifts it.
		h.reserve(1, 1000, 1)
		if p := h.S.Progress(digest); !p.Held(1) {
			h.Fatal("a plain reservation lifted the step's hold")
		}
		c := call(1, `{"id":1}`)
		hd, err := h.S.NewHold(ctx, c, ledger.HoldSpec{Reason: "on_error", Cause: "on_error", Expires: h.clk.Now().Add(time.Hour)})
		if err != nil {
			h.Fatal(err)
		}
		if _, err := h.S.UpdateHold(ctx, hd.ID, ledger.HoldUpdate{State: ledger.HoldApproved}); err != nil {
			h.Fatal(err)
		}
		r := rv(1, 1000, `{"id":1}`)
		r.HoldID = hd.ID
		n := h.S.Progress(digest).Calls(1)
		if _, err := h.S.Reserve(ctx, r); err != nil {
			h.Fatal(err)
		}
		if p := h.S.Progress(digest); p.Held(1) || p.Calls(1) != n+1 {
			h.Fatalf("after the approved hold: held %v calls %d, want %d", p.Held(1), p.Calls(1), n+1)
		}
		h.Restart()
		if p := h.S.Progress(digest); p.Held(1) {
			h.Fatal("the lifted hold is back after a restart")
		}
	}},
	{"holds", func(h *harness) {
		c := call(0, `{"b":2,"a":1}`)
		exp := h.clk.Now().Add(time.Hour)
		hd, err := h.S.NewHold(ctx, c, ledger.HoldSpec{Reason: "needs approval\nmore", Expires: exp})
		if err != nil {
			h.Fatal(err)
		}
		if hd.State != ledger.HoldPending || hd.ID == "" || hd.Reason != "needs approval …" || hd.Step != stepName(0) || hd.RequestedBy != "token:ci" ||
			string(hd.Args) != `{"a":1,"b":2}` || !hd.Expires.Equal(exp) || !hd.Created.Equal(start) {
			h.Fatalf("new hold: %+v", hd)
		}
		// The same call, arguments in another order: the open hold again.
		again, err := h.S.NewHold(ctx, call(0, `{"a":1,"b":2}`), ledger.HoldSpec{Reason: "again", Expires: exp.Add(time.Hour)})
		if err != nil || again.ID != hd.ID || again.Reason != hd.Reason {
			h.Fatalf("the same call held again: %+v, %v", again, err)
		}
		if f, ok := h.S.FindHold(c); !ok || f.ID != hd.ID {
			h.Fatalf("find hold: %+v %v", f, ok)
		}
		if _, ok := h.S.FindHold(call(0, `{"a":2}`)); ok {
			h.Fatal("found a hold for other arguments")
		}
		r := ledger.Reservation{Call: c, MaxCalls: 5, HoldID: hd.ID}
		if _, err := h.S.Reserve(ctx, r); !errors.Is(err, ledger.ErrHoldState) {
			h.Fatalf("pending hold consumed: %v", err)
		}
		if _, err := h.S.UpdateHold(ctx, hd.ID, ledger.HoldUpdate{State: ledger.HoldConsumed}); !errors.Is(err, ledger.ErrInvalidArgument) {
			h.Fatalf("update to consumed: %v", err)
		}
		if _, err := h.S.UpdateHold(ctx, hd.ID, ledger.HoldUpdate{Evidence: "ab"}); !errors.Is(err, ledger.ErrInvalidArgument) {
			h.Fatalf("evidence without an approval: %v", err)
		}
		if _, err := h.S.UpdateHold(ctx, "nope", ledger.HoldUpdate{State: ledger.HoldApproved}); !errors.Is(err, ledger.ErrUnknownHold) {
			h.Fatalf("unknown hold approved: %v", err)
		}
		pr, err := h.S.UpdateHold(ctx, hd.ID, ledger.HoldUpdate{PRURL: "https://github.com/o/r/pull/7", Note: "pull request opened"})
		if err != nil || pr.PR != 7 || pr.State != ledger.HoldPending {
			h.Fatalf("set the PR: %+v %v", pr, err)
		}
		h.clk.Advance(time.Minute)
		ap, err := h.S.UpdateHold(ctx, hd.ID, ledger.HoldUpdate{State: ledger.HoldApproved, Evidence: strings.Repeat("e", 64)})
		if err != nil || ap.State != ledger.HoldApproved || ap.ApprovalSHA256 != strings.Repeat("e", 64) || !ap.Updated.Equal(start.Add(time.Minute)) {
			h.Fatalf("approve: %+v %v", ap, err)
		}
		if _, err := h.S.UpdateHold(ctx, hd.ID, ledger.HoldUpdate{State: ledger.HoldRejected}); !errors.Is(err, ledger.ErrHoldState) {
			h.Fatalf("approved hold rejected: %v", err)
		}
		// An approved hold is found again for the call.
		if again, err := h.S.NewHold(ctx, c, ledger.HoldSpec{Reason: "x", Expires: exp}); err != nil || again.ID != hd.ID || again.State != ledger.HoldApproved {
			h.Fatalf("approved hold held again: %+v %v", again, err)
		}
		for name, bad := range map[string]ledger.Reservation{
			"other arguments": {Call: call(0, `{"a":2}`), MaxCalls: 1, HoldID: hd.ID},
			"other tool":      {Call: ledger.Call{PlanDigest: digest, Step: stepName(0), Tool: "delete", Args: c.Args}, MaxCalls: 1, HoldID: hd.ID},
			"other plan":      {Call: ledger.Call{PlanDigest: "sha256:other", Step: stepName(0), Tool: "refund", Args: c.Args}, MaxCalls: 1, HoldID: hd.ID},
		} {
			if _, err := h.S.Reserve(ctx, bad); !errors.Is(err, ledger.ErrHoldMismatch) {
				h.Fatalf("%s: %v, want ErrHoldMismatch", name, err)
			}
		}
		if _, err := h.S.Reserve(ctx, ledger.Reservation{Call: c, MaxCalls: 1, HoldID: "0000"}); !errors.Is(err, ledger.ErrUnknownHold) {
			h.Fatalf("unknown hold: %v", err)
		}
		h.calls(0, 0)
		tk, err := h.S.Reserve(ctx, r)
		if err != nil || tk.Used != 1 || tk.Seq == 0 {
			h.Fatalf("approved hold consumed: %+v %v", tk, err)
		}
		if g, ok := h.S.GetHold(hd.ID); !ok || g.State != ledger.HoldConsumed {
			h.Fatalf("consumed hold: %+v", g)
		}
		if _, err := h.S.Reserve(ctx, r); !errors.Is(err, ledger.ErrHoldState) {
			h.Fatalf("hold consumed twice: %v", err)
		}
		// A consumed hold is not found again: a new one is made.
		next, err := h.S.NewHold(ctx, c, ledger.HoldSpec{Reason: "again", Expires: exp})
		if err != nil || next.ID == hd.ID || next.State != ledger.HoldPending {
			h.Fatalf("hold after a consumed one: %+v %v", next, err)
		}
		rej, err := h.S.UpdateHold(ctx, next.ID, ledger.HoldUpdate{State: ledger.HoldRejected, Note: "no"})
		if err != nil || rej.State != ledger.HoldRejected {
			h.Fatalf("reject: %+v %v", rej, err)
		}
		if _, err := h.S.Reserve(ctx, ledger.Reservation{Call: c, MaxCalls: 5, HoldID: next.ID}); !errors.Is(err, ledger.ErrHoldState) {
			h.Fatalf("rejected hold consumed: %v", err)
		}
		h.Restart()
		hs := h.S.ListHolds()
		if len(hs) != 2 || hs[0].ID != hd.ID || hs[0].State != ledger.HoldConsumed || hs[1].State != ledger.HoldRejected || hs[0].PR != 7 {
			h.Fatalf("holds after a restart: %+v", hs)
		}
	}},
	{"hold over the limit", func(h *harness) {
		h.reserve(0, 2, 2)
		c := call(0, `{"id":1}`)
		hd, err := h.S.NewHold(ctx, c, ledger.HoldSpec{Reason: "max_calls", Cause: "max_calls", Expires: h.clk.Now().Add(time.Hour)})
		if err != nil {
			h.Fatal(err)
		}
		if _, err := h.S.UpdateHold(ctx, hd.ID, ledger.HoldUpdate{State: ledger.HoldApproved}); err != nil {
			h.Fatal(err)
		}
		if _, err := h.S.Reserve(ctx, ledger.Reservation{Call: c, MaxCalls: 2, HoldID: hd.ID}); !errors.Is(err, ledger.ErrExhausted) {
			h.Fatalf("approved hold without OverLimit past max_calls: %v", err)
		}
		tk, err := h.S.Reserve(ctx, ledger.Reservation{Call: c, MaxCalls: 2, HoldID: hd.ID, OverLimit: true})
		if err != nil || tk.Used != 3 {
			h.Fatalf("over the limit: %+v %v", tk, err)
		}
		h.calls(0, 3)
		if _, err := h.S.Reserve(ctx, rv(0, 2, `{"id":1}`)); !errors.Is(err, ledger.ErrExhausted) {
			h.Fatalf("after the call over the limit: %v", err)
		}
	}},
	{"hold causes and pins", func(h *harness) {
		c := call(2, `{"id":9}`)
		exp := h.clk.Now().Add(time.Hour)
		a, err := h.S.NewHold(ctx, c, ledger.HoldSpec{Reason: "r", Cause: "approval,pin", ObservedPin: "v1", Expires: exp})
		if err != nil || a.Cause != "approval,pin" || a.ObservedPin != "v1" {
			h.Fatalf("hold: %+v %v", a, err)
		}
		for _, tc := range []struct {
			cause, pin string
			same       bool
		}{
			{"approval", "v1", true},
			{"pin", "v1", true},
			{"", "v1", true},
			{"approval,pin", "v2", false},
			{"approval,max_calls", "v1", false},
		} {
			b, err := h.S.NewHold(ctx, c, ledger.HoldSpec{Reason: "r", Cause: tc.cause, ObservedPin: tc.pin, Expires: exp})
			if err != nil || (b.ID == a.ID) != tc.same {
				h.Fatalf("cause %q pin %q: hold %s (first %s), %v", tc.cause, tc.pin, b.ID, a.ID, err)
			}
			if !tc.same {
				a = b // the newest is the call's hold now
			}
		}
		if f, ok := h.S.FindHold(c); !ok || f.ID != a.ID {
			h.Fatalf("find: %+v, want the newest %s", f, a.ID)
		}
	}},
	{"hold expiry", func(h *harness) {
		c := call(0, `{"id":1}`)
		hd, err := h.S.NewHold(ctx, c, ledger.HoldSpec{Reason: "r", Expires: h.clk.Now().Add(time.Hour)})
		if err != nil {
			h.Fatal(err)
		}
		ap, err := h.S.NewHold(ctx, call(1, `{}`), ledger.HoldSpec{Reason: "r", Expires: h.clk.Now().Add(time.Hour)})
		if err != nil {
			h.Fatal(err)
		}
		if _, err := h.S.UpdateHold(ctx, ap.ID, ledger.HoldUpdate{State: ledger.HoldApproved}); err != nil {
			h.Fatal(err)
		}
		h.clk.Advance(time.Hour + time.Second)
		for _, id := range []string{hd.ID, ap.ID} {
			if g, ok := h.S.GetHold(id); !ok || g.State != ledger.HoldExpired {
				h.Fatalf("hold past its expiry: %+v", g)
			}
		}
		if _, err := h.S.UpdateHold(ctx, hd.ID, ledger.HoldUpdate{State: ledger.HoldApproved}); !errors.Is(err, ledger.ErrHoldState) {
			h.Fatalf("expired hold approved: %v", err)
		}
		if _, err := h.S.Reserve(ctx, ledger.Reservation{Call: call(1, `{}`), MaxCalls: 5, HoldID: ap.ID}); !errors.Is(err, ledger.ErrHoldState) {
			h.Fatalf("expired approved hold consumed: %v", err)
		}
		next, err := h.S.NewHold(ctx, c, ledger.HoldSpec{Reason: "r", Expires: h.clk.Now().Add(time.Hour)})
		if err != nil || next.ID == hd.ID {
			h.Fatalf("hold after an expired one: %+v %v", next, err)
		}
		h.Restart()
		if g, _ := h.S.GetHold(hd.ID); g.State != ledger.HoldExpired {
			h.Fatalf("after a restart: %s", g.State)
		}
	}},
	{"approval read back", func(h *harness) {
		c := call(0, `{}`)
		hd, err := h.S.NewHold(ctx, c, ledger.HoldSpec{Reason: "r", Expires: h.clk.Now().Add(time.Hour)})
		if err != nil {
			h.Fatal(err)
		}
		if _, err := h.S.UpdateHold(ctx, hd.ID, ledger.HoldUpdate{State: ledger.HoldApproved, Evidence: strings.Repeat("a", 64)}); err != nil {
			h.Fatal(err)
		}
		h.Restart()
		// An approval read back is not used until verified again.
		if g, _ := h.S.GetHold(hd.ID); g.State != ledger.HoldPending {
			h.Fatalf("approval read back: %s, want pending", g.State)
		}
		if _, err := h.S.Reserve(ctx, ledger.Reservation{Call: c, MaxCalls: 5, HoldID: hd.ID}); !errors.Is(err, ledger.ErrHoldState) {
			h.Fatalf("approval read back consumed: %v", err)
		}
		if g, err := h.S.UpdateHold(ctx, hd.ID, ledger.HoldUpdate{State: ledger.HoldApproved, Evidence: strings.Repeat("a", 64)}); err != nil || g.State != ledger.HoldApproved {
			h.Fatalf("approved again: %+v %v", g, err)
		}
		if _, err := h.S.Reserve(ctx, ledger.Reservation{Call: c, MaxCalls: 5, HoldID: hd.ID}); err != nil {
			h.Fatalf("verified again, consumed: %v", err)
		}
	}},
	{"lease returned at close", func(h *harness) {
		for round, want := range []int{5, 12, 40} {
			h.reserve(0, 1000, want-h.S.Progress(digest).Calls(0))
			h.calls(0, want)
			h.Restart()
			h.calls(0, want)
			if tk := h.reserve(0, 1000, 1)[0]; tk.Used != want+1 {
				h.Fatalf("round %d: the call after a restart is call %d, want %d", round, tk.Used, want+1)
			}
			h.Restart()
		}
	}},
	{"lease after a crash", func(h *harness) {
		// 3 calls of 1000: the lease of 10 (1% of what is left) taken with
		// the first call counts whole after a crash.
		h.reserve(0, 1000, 3)
		h.Crash()
		want := 3
		if h.b.Leases() {
			want = 10
		}
		h.calls(0, want)
		h.clk.Advance(h.b.LeaseTTL() + time.Second)
		h.Restart()
		h.calls(0, want)
		if tk := h.reserve(0, 1000, 1)[0]; tk.Used != want+1 {
			h.Fatalf("first call after the settled lease: call %d, want %d", tk.Used, want+1)
		}
		h.calls(0, want+1)
		// A crash never grants more than max_calls.
		h.reserve(1, 250, 248)
		h.Crash()
		h.clk.Advance(h.b.LeaseTTL() + time.Second)
		h.Restart()
		n := h.S.Progress(digest).Calls(1)
		if n < 248 || n > 250 {
			h.Fatalf("after a crash: %d calls of 250 counted, 248 taken", n)
		}
		for ; n < 250; n++ {
			h.reserve(1, 250, 1)
		}
		if _, err := h.S.Reserve(ctx, rv(1, 250, `{}`)); !errors.Is(err, ledger.ErrExhausted) {
			h.Fatalf("past max_calls after a crash: %v", err)
		}
	}},
	{"lease over time", func(h *harness) {
		// Calls spread over time: a lease used past its time is given
		// back, and the counts stay exact.
		for n := 1; n <= 30; n++ {
			tk := h.reserve(0, 1000, 1)[0]
			if tk.Used != n {
				h.Fatalf("call %d: ticket %d", n, tk.Used)
			}
			h.clk.Advance(h.b.LeaseTTL()/3 + time.Millisecond)
		}
		h.calls(0, 30)
		h.Restart()
		h.calls(0, 30)
	}},
	{"crash keeps what was decided", func(h *harness) {
		ts := h.reserve(0, 3, 2)
		hd, err := h.S.NewHold(ctx, call(1, `{}`), ledger.HoldSpec{Reason: "r", Expires: h.clk.Now().Add(time.Hour)})
		if err != nil {
			h.Fatal(err)
		}
		if _, err := h.S.UpdateHold(ctx, hd.ID, ledger.HoldUpdate{State: ledger.HoldRejected}); err != nil {
			h.Fatal(err)
		}
		if err := h.S.LoadPlan(ctx, ledger.PlanLoad{Name: "p", Digest: digest, SignedAt: start}); err != nil {
			h.Fatal(err)
		}
		_ = ts
		h.Crash()
		h.calls(0, 2)
		if g, ok := h.S.GetHold(hd.ID); !ok || g.State != ledger.HoldRejected {
			h.Fatalf("rejected hold after a crash: %+v", g)
		}
		if err := h.S.LoadPlan(ctx, ledger.PlanLoad{Name: "p", Digest: "sha256:old", SignedAt: start.Add(-time.Hour)}); !errors.Is(err, ledger.ErrDowngrade) {
			h.Fatalf("downgrade after a crash: %v", err)
		}
	}},
	{"no downgrade", func(h *harness) {
		t1, t2 := start.Add(-2*time.Hour), start.Add(-time.Hour)
		if err := h.S.LoadPlan(ctx, ledger.PlanLoad{Name: "p", Digest: digest, SignedAt: t2}); err != nil {
			h.Fatal(err)
		}
		if err := h.S.LoadPlan(ctx, ledger.PlanLoad{Name: "p", Digest: digest, SignedAt: t2}); err != nil {
			h.Fatalf("the same plan again: %v", err)
		}
		var de *ledger.DowngradeError
		if err := h.S.LoadPlan(ctx, ledger.PlanLoad{Name: "p", Digest: "sha256:old", SignedAt: t1}); !errors.As(err, &de) || !de.Newest.Equal(t2) {
			h.Fatalf("older plan: %v", err)
		}
		if err := h.S.LoadPlan(ctx, ledger.PlanLoad{Name: "q", Digest: "sha256:q", SignedAt: t1}); err != nil {
			h.Fatalf("another name: %v", err)
		}
		// Marks of a signed path, per trust policy.
		if err := h.S.LoadPlan(ctx, ledger.PlanLoad{Name: "x", Path: "plans/a.hcl", Trust: "T", Digest: "sha256:a", SignedAt: t2}); err != nil {
			h.Fatal(err)
		}
		if err := h.S.LoadPlan(ctx, ledger.PlanLoad{Name: "y", Path: "plans/a.hcl", Trust: "T", Digest: "sha256:a0", SignedAt: t1}); !errors.Is(err, ledger.ErrDowngrade) {
			h.Fatalf("older plan for the same path, another label: %v", err)
		}
		if err := h.S.LoadPlan(ctx, ledger.PlanLoad{Name: "y", Path: "plans/b.hcl", Trust: "T", Digest: "sha256:b", SignedAt: t1}); err != nil {
			h.Fatalf("another path: %v", err)
		}
		if err := h.S.LoadPlan(ctx, ledger.PlanLoad{Digest: "sha256:b", SignedAt: t1}); !errors.Is(err, ledger.ErrInvalidArgument) {
			h.Fatalf("plan without a name: %v", err)
		}
		h.Restart()
		if err := h.S.LoadPlan(ctx, ledger.PlanLoad{Name: "p", Digest: "sha256:old", SignedAt: t1}); !errors.Is(err, ledger.ErrDowngrade) {
			h.Fatalf("older plan after a restart: %v", err)
		}
		if err := h.S.LoadPlan(ctx, ledger.PlanLoad{Name: "y", Path: "plans/a.hcl", Trust: "T", Digest: "sha256:a0", SignedAt: t1}); !errors.Is(err, ledger.ErrDowngrade) {
			h.Fatalf("older plan for the same path after a restart: %v", err)
		}
	}},
}

// records parses a journal's lines.
func records(h *harness, data []byte) []map[string]any {
	h.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			h.Fatalf("journal line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}
