package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const digest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"

func openT(t testing.TB, o Options) *Ledger {
	t.Helper()
	l, err := Open(context.Background(), o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func call(step string, idx int, tool, args string) Call {
	c := Call{PlanDigest: digest, Step: step, StepIndex: idx, Tool: tool}
	if args != "" {
		c.Args = json.RawMessage(args)
	}
	return c
}

// readRecords parses the journal for assertions.
func readRecords(t testing.TB, path string) []parsed {
	t.Helper()
	var out []parsed
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, _, _, err := scan(f, func(p *parsed, _ bool) string { out = append(out, *p); return "" }); err != nil {
		t.Fatalf("journal does not verify: %v", err)
	}
	return out
}

func TestReserveMaxCalls(t *testing.T) {
	tests := []struct {
		name     string
		max      int
		attempts int
		wantOK   int
	}{
		{"max 1 allows one", 1, 3, 1},
		{"max 3 allows three", 3, 5, 3},
		{"attempts below max all pass", 5, 2, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := openT(t, Options{Dir: t.TempDir()})
			ctx := context.Background()
			ok := 0
			for i := 0; i < tt.attempts; i++ {
				tk, err := l.Reserve(ctx, Reservation{Call: call("lookup", 0, "get_order", `{"order_id":"4711"}`), MaxCalls: tt.max})
				if err == nil {
					ok++
					if tk.Used != ok || tk.Seq == 0 {
						t.Fatalf("ticket %+v: want Used %d and a seq", tk, ok)
					}
					continue
				}
				var ex *ExhaustedError
				if !errors.As(err, &ex) || !errors.Is(err, ErrExhausted) {
					t.Fatalf("attempt %d: err %v, want *ExhaustedError", i, err)
				}
				if ex.Used != tt.max || ex.Max != tt.max || ex.Step != "lookup" {
					t.Fatalf("ExhaustedError %+v, want used=max=%d step lookup", ex, tt.max)
				}
				if !strings.Contains(err.Error(), `step "lookup": max_calls`) {
					t.Fatalf("message %q does not name the step and bound", err)
				}
			}
			if ok != tt.wantOK {
				t.Fatalf("%d reservations succeeded, want %d", ok, tt.wantOK)
			}
			if got := l.Progress(digest).Calls(0); got != tt.wantOK {
				t.Fatalf("Progress.Calls(0) = %d, want %d", got, tt.wantOK)
			}
		})
	}
}

func TestReserveInvalid(t *testing.T) {
	l := openT(t, Options{Dir: t.TempDir()})
	tests := []struct {
		name string
		rv   Reservation
	}{
		{"max_calls 0", Reservation{Call: call("a", 0, "t", ""), MaxCalls: 0}},
		{"negative step index", Reservation{Call: call("a", -1, "t", ""), MaxCalls: 1}},
		{"over limit without hold", Reservation{Call: call("a", 0, "t", ""), MaxCalls: 1, OverLimit: true}},
		{"arguments not JSON", Reservation{Call: call("a", 0, "t", `{"a":`), MaxCalls: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := l.Reserve(context.Background(), tt.rv); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("err %v, want ErrInvalidArgument", err)
			}
		})
	}
	if n := len(readRecordsAfterClose(t, l)); n != 0 {
		t.Fatalf("%d records written for invalid reservations, want 0", n)
	}
}

func readRecordsAfterClose(t *testing.T, l *Ledger) []parsed {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return readRecords(t, l.AuditPath())
}

func TestReserveConcurrentExact(t *testing.T) {
	for _, max := range []int{1, 7} {
		t.Run("max "+string(rune('0'+max)), func(t *testing.T) {
			l := openT(t, Options{Dir: t.TempDir()})
			var (
				wg        sync.WaitGroup
				ok, ex    atomic.Int64
				start     = make(chan struct{})
				otherErrs = make(chan error, 100)
			)
			for i := 0; i < 100; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					_, err := l.Reserve(context.Background(), Reservation{Call: call("refund", 1, "refund_customer", `{"amount":30}`), MaxCalls: max})
					switch {
					case err == nil:
						ok.Add(1)
					case errors.Is(err, ErrExhausted):
						ex.Add(1)
					default:
						otherErrs <- err
					}
				}()
			}
			close(start)
			wg.Wait()
			close(otherErrs)
			for err := range otherErrs {
				t.Fatalf("unexpected error: %v", err)
			}
			if ok.Load() != int64(max) || ex.Load() != int64(100-max) {
				t.Fatalf("%d granted, %d exhausted; want exactly %d granted", ok.Load(), ex.Load(), max)
			}
			allows := 0
			for _, r := range readRecordsAfterClose(t, l) {
				if r.Decision == DecisionAllow {
					allows++
				}
			}
			if allows != max {
				t.Fatalf("journal has %d allow records, want %d", allows, max)
			}
		})
	}
}

func TestCheckRunsUnderLockAndAborts(t *testing.T) {
	l := openT(t, Options{Dir: t.TempDir()})
	ctx := context.Background()
	tk, err := l.Reserve(ctx, Reservation{Call: call("lookup", 0, "get_order", ""), MaxCalls: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Complete(ctx, tk, Outcome{OK: true}); err != nil {
		t.Fatal(err)
	}
	orderErr := errors.New("step refund: out of order")
	var seen Progress
	_, err = l.Reserve(ctx, Reservation{Call: call("close", 3, "close_ticket", ""), MaxCalls: 1,
		Check: func(p Progress) error {
			seen = Progress{Current: p.Current, done: append([]bool(nil), p.done...)}
			return orderErr
		}})
	if !errors.Is(err, orderErr) {
		t.Fatalf("err %v, want the Check error unchanged", err)
	}
	if seen.Current != 0 || !seen.Done(0) || seen.Done(1) {
		t.Fatalf("Check saw current %d done(0)=%v done(1)=%v; want 0 true false", seen.Current, seen.Done(0), seen.Done(1))
	}
	if p := l.Progress(digest); p.Current != 0 || p.Calls(3) != 0 {
		t.Fatalf("a refused Check changed the state: current %d calls(3) %d", p.Current, p.Calls(3))
	}
	if n := len(readRecordsAfterClose(t, l)); n != 2 {
		t.Fatalf("%d records, want 2 (allow and outcome; nothing for the refused check)", n)
	}
}

func TestProgressSemantics(t *testing.T) {
	l := openT(t, Options{Dir: t.TempDir()})
	ctx := context.Background()
	reserve := func(step string, idx int) Ticket {
		t.Helper()
		tk, err := l.Reserve(ctx, Reservation{Call: call(step, idx, "t"+step, ""), MaxCalls: 5})
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	a := reserve("a", 0)
	if p := l.Progress(digest); p.Current != 0 || p.Done(0) {
		t.Fatalf("before the outcome: current %d done(0) %v", p.Current, p.Done(0))
	}
	if err := l.Complete(ctx, a, Outcome{OK: false, Err: "boom\nsecond line"}); err != nil {
		t.Fatal(err)
	}
	if l.Progress(digest).Done(0) {
		t.Fatal("a failed call marked the step done")
	}
	a2 := reserve("a", 0)
	if err := l.Complete(ctx, a2, Outcome{OK: true, Latency: 1500 * time.Microsecond}); err != nil {
		t.Fatal(err)
	}
	c := reserve("c", 2)
	p := l.Progress(digest)
	if p.Current != 2 || !p.Done(0) || p.Done(2) || p.Calls(0) != 2 || p.Calls(2) != 1 {
		t.Fatalf("progress current %d done %v/%v calls %d/%d; want 2 true/false 2/1", p.Current, p.Done(0), p.Done(2), p.Calls(0), p.Calls(2))
	}
	_ = c
	recs := readRecordsAfterClose(t, l)
	out := recs[1]
	if out.Type != typeOutcome || out.Ref != a.Seq || out.OK == nil || *out.OK || out.Error != "boom …" {
		t.Fatalf("outcome record %+v: want ref %d, ok false, one-line error", out, a.Seq)
	}
	if lat := recs[3].LatencyMS; lat == nil || *lat != 1.5 {
		t.Fatalf("latency_ms %v, want 1.5", lat)
	}
}

func TestRestartReplaysState(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	l := openT(t, Options{Dir: dir})
	tk, err := l.Reserve(ctx, Reservation{Call: call("lookup", 0, "get_order", `{"order_id":"4711"}`), MaxCalls: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Complete(ctx, tk, Outcome{OK: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Reserve(ctx, Reservation{Call: call("refund", 1, "refund_customer", `{"amount":30}`), MaxCalls: 1}); err != nil {
		t.Fatal(err)
	}
	h, err := l.Hold(ctx, call("email", 2, "send_email", `{"to":"a@b"}`), "approval = each", time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.UpdateHold(ctx, h.ID, HoldUpdate{PRURL: "https://github.com/o/r/pull/7"}); err != nil {
		t.Fatal(err)
	}
	signed := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	if err := l.LoadPlan(ctx, PlanLoad{Name: "refund-4711", Digest: digest, SignedAt: signed}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l2 := openT(t, Options{Dir: dir})
	p := l2.Progress(digest)
	if p.Current != 1 || !p.Done(0) || p.Done(1) || p.Calls(0) != 1 || p.Calls(1) != 1 {
		t.Fatalf("replayed progress current %d done %v/%v calls %d/%d", p.Current, p.Done(0), p.Done(1), p.Calls(0), p.Calls(1))
	}
	if _, err := l2.Reserve(ctx, Reservation{Call: call("refund", 1, "refund_customer", `{"amount":30}`), MaxCalls: 1}); !errors.Is(err, ErrExhausted) {
		t.Fatalf("after restart a used-up step gave err %v, want ErrExhausted", err)
	}
	got, ok := l2.GetHold(h.ID)
	if !ok || got.State != HoldPending || got.PRURL != "https://github.com/o/r/pull/7" || string(got.Args) != `{"to":"a@b"}` {
		t.Fatalf("replayed hold %+v", got)
	}
	err = l2.CheckNotOlder("refund-4711", signed.Add(-time.Second))
	if !errors.Is(err, ErrDowngrade) {
		t.Fatalf("high-water mark lost over restart: %v", err)
	}
	// The chain continues across the restart.
	if err := l2.Block(ctx, call("refund", 1, "refund_customer", `{"amount":30}`), "max_calls"); err != nil {
		t.Fatal(err)
	}
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	if recs := readRecords(t, l2.AuditPath()); len(recs) != 7 || recs[6].Decision != DecisionBlock {
		t.Fatalf("%d records, want 7 ending with the block", len(recs))
	}
}

func TestSecondOpenRefused(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir})
	_, err := Open(context.Background(), Options{Dir: dir})
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want *LockedError", err)
	}
	if le.PID != os.Getpid() {
		t.Fatalf("LockedError names pid %d, want the holder %d", le.PID, os.Getpid())
	}
	// Both processes are named, the holder with its command line, and the fix.
	self := fmt.Sprintf("pid %d: %s", os.Getpid(), commandLine(os.Args))
	if le.Command != commandLine(os.Args) {
		t.Fatalf("LockedError names command %q, want the holder's %q", le.Command, commandLine(os.Args))
	}
	for _, want := range []string{"is in use by another planlock proxy", dir, self, "--state"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("message %q lacks %q", err, want)
		}
	}
	// The refused Open must not have disturbed the holder.
	if _, err := l.Reserve(context.Background(), Reservation{Call: call("a", 0, "t", ""), MaxCalls: 1}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l2, err := Open(context.Background(), Options{Dir: dir})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	l2.Close()
}

func TestAuditInNewDirectory(t *testing.T) {
	audit := filepath.Join(t.TempDir(), "logs", "planlock", "audit.jsonl")
	l := openT(t, Options{Dir: t.TempDir(), AuditPath: audit})
	if _, err := l.Reserve(context.Background(), Reservation{Call: call("a", 0, "t", ""), MaxCalls: 1}); err != nil {
		t.Fatal(err)
	}
	if recs := readRecordsAfterClose(t, l); len(recs) != 1 || l.AuditPath() != audit {
		t.Fatalf("%d records in %s", len(recs), l.AuditPath())
	}
}

func TestAuditSharedByTwoDirsRefused(t *testing.T) {
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	openT(t, Options{Dir: t.TempDir(), AuditPath: audit})
	_, err := Open(context.Background(), Options{Dir: t.TempDir(), AuditPath: audit})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "audit log "+audit+" is in use") {
		t.Fatalf("err %v, want the audit log named as in use", err)
	}
}

func TestBinding(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		after func(t *testing.T, dir, audit string) Options
		want  string
	}{
		{"other audit path", func(t *testing.T, dir, audit string) Options {
			return Options{Dir: dir, AuditPath: filepath.Join(dir, "other.jsonl")}
		}, "keeps its call counts in audit log"},
		{"journal deleted", func(t *testing.T, dir, audit string) Options {
			if err := os.Remove(audit); err != nil {
				t.Fatal(err)
			}
			return Options{Dir: dir}
		}, "is missing, so its call counts are lost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openT(t, Options{Dir: dir})
			if _, err := l.Reserve(ctx, Reservation{Call: call("a", 0, "t", ""), MaxCalls: 1}); err != nil {
				t.Fatal(err)
			}
			l.Close()
			_, err := Open(ctx, tt.after(t, dir, l.AuditPath()))
			if !errors.Is(err, ErrBinding) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want ErrBinding with %q", err, tt.want)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	l := openT(t, Options{Dir: dir, Redact: true})
	const secret = `{"card":"4111-SECRET","amount":30}`
	if _, err := l.Reserve(ctx, Reservation{Call: call("refund", 0, "refund_customer", secret), MaxCalls: 1}); err != nil {
		t.Fatal(err)
	}
	if err := l.Block(ctx, call("refund", 0, "refund_customer", secret), "max_calls"); err != nil {
		t.Fatal(err)
	}
	h, err := l.Hold(ctx, call("refund", 0, "refund_customer", secret), "pin changed", time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if h.Args != nil {
		t.Fatalf("redacted hold kept its arguments: %s", h.Args)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(l.AuditPath())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("SECRET")) {
		t.Fatalf("redacted journal contains the arguments:\n%s", data)
	}
	want, _ := ArgsDigest(json.RawMessage(secret))
	for i, r := range readRecords(t, l.AuditPath()) {
		if r.ArgsSHA != want || r.Args != nil {
			t.Fatalf("record %d: args %s args_sha256 %q, want only the digest %s", i+1, r.Args, r.ArgsSHA, want)
		}
	}
}

func TestArgsRecordedAsSent(t *testing.T) {
	l := openT(t, Options{Dir: t.TempDir()})
	args := `{"z": "<b>&</b>", "a": 30.0}`
	if _, err := l.Reserve(context.Background(), Reservation{Call: call("a", 0, "t", args), MaxCalls: 1}); err != nil {
		t.Fatal(err)
	}
	recs := readRecordsAfterClose(t, l)
	// Only insignificant whitespace goes; key order, spelling and HTML stay.
	if got := string(recs[0].Args); got != `{"z":"<b>&</b>","a":30.0}` {
		t.Fatalf("args recorded as %s", got)
	}
}

func TestHolds(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	l := openT(t, Options{Dir: t.TempDir(), Now: clock})
	exp := now.Add(time.Hour)
	c := call("refund", 1, "refund_customer", `{"order_id":"4711","amount":30}`)

	h, err := l.Hold(ctx, c, "pin mismatch", exp)
	if err != nil {
		t.Fatal(err)
	}
	if h.State != HoldPending || h.ID == "" || string(h.Args) != `{"amount":30,"order_id":"4711"}` {
		t.Fatalf("new hold %+v", h)
	}
	// The same call (spelled differently) is the same hold while pending.
	same := call("refund", 1, "refund_customer", `{ "amount": 30.0, "order_id": "4711" }`)
	h2, err := l.Hold(ctx, same, "pin mismatch", exp)
	if err != nil || h2.ID != h.ID {
		t.Fatalf("repeat hold %v %v, want the pending hold %s", h2.ID, err, h.ID)
	}
	if f, ok := l.FindHold(same); !ok || f.ID != h.ID {
		t.Fatalf("FindHold = %v %v", f.ID, ok)
	}

	// Not approved yet: consuming fails and takes no count.
	_, err = l.Reserve(ctx, Reservation{Call: same, MaxCalls: 1, HoldID: h.ID})
	if !errors.Is(err, ErrHoldState) {
		t.Fatalf("consume pending hold: %v, want ErrHoldState", err)
	}
	if _, err := l.UpdateHold(ctx, h.ID, HoldUpdate{State: HoldApproved, PRURL: "https://x/pull/1"}); err != nil {
		t.Fatal(err)
	}
	// Holding the same call again hands back the approved hold to consume.
	if again, err := l.Hold(ctx, same, "pin mismatch", exp); err != nil || again.ID != h.ID || again.State != HoldApproved {
		t.Fatalf("hold of an approved call: %s %s %v, want the approved hold %s", again.ID, again.State, err, h.ID)
	}
	other := call("refund", 1, "refund_customer", `{"order_id":"4711","amount":29}`)
	if _, err := l.Reserve(ctx, Reservation{Call: other, MaxCalls: 1, HoldID: h.ID}); !errors.Is(err, ErrHoldMismatch) {
		t.Fatalf("consume for another call: %v, want ErrHoldMismatch", err)
	}
	if _, err := l.Reserve(ctx, Reservation{Call: same, MaxCalls: 1, HoldID: "nope"}); !errors.Is(err, ErrUnknownHold) {
		t.Fatalf("unknown hold: %v", err)
	}
	tk, err := l.Reserve(ctx, Reservation{Call: same, MaxCalls: 1, HoldID: h.ID})
	if err != nil {
		t.Fatalf("consume approved hold: %v", err)
	}
	if tk.Used != 1 {
		t.Fatalf("consumed hold counted %d, want 1", tk.Used)
	}
	if g, _ := l.GetHold(h.ID); g.State != HoldConsumed {
		t.Fatalf("hold state %s after consume, want consumed", g.State)
	}
	if _, err := l.Reserve(ctx, Reservation{Call: same, MaxCalls: 5, HoldID: h.ID}); !errors.Is(err, ErrHoldState) {
		t.Fatalf("second consume: %v, want ErrHoldState (exactly once)", err)
	}

	// A consumed hold does not absorb a new hold for the same call.
	h3, err := l.Hold(ctx, c, "approval = each", exp)
	if err != nil || h3.ID == h.ID {
		t.Fatalf("hold after consume: %v %v, want a new hold", h3.ID, err)
	}
	// Over the limit only with OverLimit.
	if _, err := l.UpdateHold(ctx, h3.ID, HoldUpdate{State: HoldApproved}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Reserve(ctx, Reservation{Call: c, MaxCalls: 1, HoldID: h3.ID}); !errors.Is(err, ErrExhausted) {
		t.Fatalf("approved hold past max_calls without OverLimit: %v", err)
	}
	if g, _ := l.GetHold(h3.ID); g.State != HoldApproved {
		t.Fatalf("a refused reservation consumed the hold: %s", g.State)
	}
	if tk, err := l.Reserve(ctx, Reservation{Call: c, MaxCalls: 1, HoldID: h3.ID, OverLimit: true}); err != nil || tk.Used != 2 {
		t.Fatalf("OverLimit consume: used %d err %v, want 2 nil", tk.Used, err)
	}

	// Transitions that are refused.
	h4, _ := l.Hold(ctx, call("email", 2, "send_email", `{}`), "approval = each", exp)
	if _, err := l.UpdateHold(ctx, h4.ID, HoldUpdate{State: HoldConsumed}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("set consumed by hand: %v", err)
	}
	if _, err := l.UpdateHold(ctx, h4.ID, HoldUpdate{State: HoldRejected, Note: "closed without merge"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.UpdateHold(ctx, h4.ID, HoldUpdate{State: HoldApproved}); !errors.Is(err, ErrHoldState) {
		t.Fatalf("approve a rejected hold: %v", err)
	}
	if _, err := l.UpdateHold(ctx, "nope", HoldUpdate{PRURL: "x"}); !errors.Is(err, ErrUnknownHold) {
		t.Fatalf("update unknown: %v", err)
	}

	// Expiry is read from the clock.
	h5, _ := l.Hold(ctx, call("close", 3, "close_ticket", `{}`), "approval", exp)
	if _, err := l.UpdateHold(ctx, h5.ID, HoldUpdate{State: HoldApproved}); err != nil {
		t.Fatal(err)
	}
	now = exp.Add(time.Second)
	if g, _ := l.GetHold(h5.ID); g.State != HoldExpired {
		t.Fatalf("approved hold past expiry reads %s, want expired", g.State)
	}
	if _, err := l.Reserve(ctx, Reservation{Call: call("close", 3, "close_ticket", `{}`), MaxCalls: 1, HoldID: h5.ID}); !errors.Is(err, ErrHoldState) {
		t.Fatalf("consume expired: %v", err)
	}
	if h6, err := l.Hold(ctx, call("close", 3, "close_ticket", `{}`), "approval", now.Add(time.Hour)); err != nil || h6.ID == h5.ID {
		t.Fatalf("hold after expiry: %v %v, want a new hold", h6.ID, err)
	}
	ids := []string{}
	for _, x := range l.ListHolds() {
		ids = append(ids, string(x.State))
	}
	if got := strings.Join(ids, ","); got != "consumed,consumed,rejected,expired,pending" {
		t.Fatalf("ListHolds states %s", got)
	}
}

func TestLoadPlanNoDowngrade(t *testing.T) {
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		load    PlanLoad
		wantErr error
	}{
		{"first load", PlanLoad{Name: "p", Digest: "d1", SignedAt: base}, nil},
		{"newer", PlanLoad{Name: "p", Digest: "d2", SignedAt: base.Add(time.Hour)}, nil},
		{"same time again (restart)", PlanLoad{Name: "p", Digest: "d2", SignedAt: base.Add(time.Hour)}, nil},
		{"older refused", PlanLoad{Name: "p", Digest: "d1", SignedAt: base}, ErrDowngrade},
		{"other name independent", PlanLoad{Name: "q", Digest: "d3", SignedAt: base.Add(-time.Hour)}, nil},
		{"no signing time", PlanLoad{Name: "p", Digest: "d1"}, ErrInvalidArgument},
	}
	l := openT(t, Options{Dir: t.TempDir()})
	for _, tt := range tests {
		err := l.LoadPlan(context.Background(), tt.load)
		if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
			t.Fatalf("%s: err %v, want %v", tt.name, err, tt.wantErr)
		}
	}
	err := l.CheckNotOlder("p", base)
	var de *DowngradeError
	if !errors.As(err, &de) || !de.Newest.Equal(base.Add(time.Hour)) {
		t.Fatalf("CheckNotOlder: %v", err)
	}
	if !strings.Contains(err.Error(), `plan "p" signed at 2026-11-01T00:00:00Z is older`) {
		t.Fatalf("message %q", err)
	}
}

func TestBlockAndOutcomeDoNotSync(t *testing.T) {
	l := openT(t, Options{Dir: t.TempDir(), FlushInterval: time.Hour})
	ctx := context.Background()
	tk, err := l.Reserve(ctx, Reservation{Call: call("a", 0, "t", ""), MaxCalls: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Complete(ctx, tk, Outcome{OK: true}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if err := l.Block(ctx, call("a", 0, "t", ""), "max_calls"); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	st := l.Stats()
	// One sync for the reservation, one at Close for the rest.
	if st.Syncs != 2 || st.Records != 12 {
		t.Fatalf("stats %+v, want 2 syncs for 12 records", st)
	}
}

func TestReserveCancelledTakesNothing(t *testing.T) {
	l := openT(t, Options{Dir: t.TempDir()})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Reserve(ctx, Reservation{Call: call("a", 0, "t", ""), MaxCalls: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if _, err := l.Reserve(context.Background(), Reservation{Call: call("a", 0, "t", ""), MaxCalls: 1}); err != nil {
		t.Fatalf("the cancelled call took the only call: %v", err)
	}
}

func TestClosedLedger(t *testing.T) {
	l := openT(t, Options{Dir: t.TempDir()})
	l.Close()
	if _, err := l.Reserve(context.Background(), Reservation{Call: call("a", 0, "t", ""), MaxCalls: 1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reserve after Close: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestWriteFailureFailsClosed(t *testing.T) {
	l := openT(t, Options{Dir: t.TempDir()})
	ctx := context.Background()
	// Make the journal unwritable underneath the writer.
	l.journal.Close()
	_, err := l.Reserve(ctx, Reservation{Call: call("a", 0, "t", ""), MaxCalls: 5})
	if !errors.Is(err, ErrFailed) {
		t.Fatalf("Reserve on a broken journal: %v, want ErrFailed", err)
	}
	_, err = l.Reserve(ctx, Reservation{Call: call("a", 0, "t", ""), MaxCalls: 5})
	if !errors.Is(err, ErrFailed) {
		t.Fatalf("Reserve after a failure: %v, want ErrFailed", err)
	}
	if got := l.Progress(digest).Calls(0); got != 1 {
		t.Fatalf("calls %d: the failed reservation must stay counted (conservative), not be released or doubled", got)
	}
}

func TestTornTailRepairedOnOpen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	l := openT(t, Options{Dir: dir})
	for i := 0; i < 3; i++ {
		if _, err := l.Reserve(ctx, Reservation{Call: call("a", 0, "t", ""), MaxCalls: 10}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	f, err := os.OpenFile(l.AuditPath(), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"seq":4,"prev":"ab`)
	f.Close()

	f, _ = os.Open(l.AuditPath())
	_, err = Verify(f)
	f.Close()
	var ve *VerifyError
	if !errors.As(err, &ve) || !ve.Torn || ve.Line != 4 {
		t.Fatalf("Verify of torn journal: %v, want torn at line 4", err)
	}

	l2 := openT(t, Options{Dir: dir})
	if got := l2.Progress(digest).Calls(0); got != 3 {
		t.Fatalf("calls %d after repair, want 3", got)
	}
	if _, err := l2.Reserve(ctx, Reservation{Call: call("a", 0, "t", ""), MaxCalls: 10}); err != nil {
		t.Fatal(err)
	}
	if recs := readRecordsAfterClose(t, l2); len(recs) != 4 || recs[3].Seq != 4 {
		t.Fatalf("after repair: %d records", len(recs))
	}
}

func reserveN(t *testing.T, dir string, n int) {
	t.Helper()
	l := openT(t, Options{Dir: dir})
	l.closeCheckpointMin = 1 // a checkpoint at each Close, whatever the journal's size
	for i := 0; i < n; i++ {
		if _, err := l.Reserve(context.Background(), Reservation{Call: call("a", 0, "t", ""), MaxCalls: 100}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// editUsed lowers the count in the record that says "used":n: the kind of
// edit that would grant extra calls.
func editUsed(t *testing.T, dir string, n int) {
	t.Helper()
	path := filepath.Join(dir, auditName)
	data, _ := os.ReadFile(path)
	from := []byte(`"used":` + strconv.Itoa(n) + `,`)
	if !bytes.Contains(data, from) {
		t.Fatalf("no record with %s", from)
	}
	if err := os.WriteFile(path, bytes.Replace(data, from, []byte(`"used":0,`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
}

// dropLines removes the last n lines of the journal of dir.
func dropLines(t *testing.T, dir string, n int) {
	t.Helper()
	path := filepath.Join(dir, auditName)
	data, _ := os.ReadFile(path)
	lines := bytes.SplitAfter(data, []byte("\n"))
	lines = lines[:len(lines)-1] // the empty rest after the last newline
	if err := os.WriteFile(path, bytes.Join(lines[:len(lines)-n], nil), 0o600); err != nil {
		t.Fatal(err)
	}
}

// editFile replaces old with new once in path.
func editFile(t *testing.T, path, old, new string) {
	t.Helper()
	data, _ := os.ReadFile(path)
	if !bytes.Contains(data, []byte(old)) {
		t.Fatalf("%s has no %q", path, old)
	}
	if err := os.WriteFile(path, bytes.Replace(data, []byte(old), []byte(new), 1), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptJournalAndCheckpoint: the journal is the truth. A damaged
// journal, a checkpoint that disagrees with it and a journal shorter than
// its anchor are refused; a checkpoint that matches only speeds up Open.
func TestCorruptJournalAndCheckpoint(t *testing.T) {
	ctx := context.Background()
	cpPath := func(dir string) string { return filepath.Join(dir, checkpointName) }
	tests := []struct {
		name      string
		setup     func(t *testing.T, dir string)
		wantIs    error  // nil: Open succeeds
		wantErr   string // in the error
		wantCalls int
	}{
		{"edited record, no checkpoint", func(t *testing.T, dir string) {
			reserveN(t, dir, 3)
			os.Remove(cpPath(dir))
			editUsed(t, dir, 2)
		}, ErrCorrupt, "line 2: record hash does not match", 0},
		{"edited record after the checkpoint (crash after a restart)", func(t *testing.T, dir string) {
			reserveN(t, dir, 3) // records 1-3, checkpoint record 4
			old, _ := os.ReadFile(cpPath(dir))
			reserveN(t, dir, 2)
			os.WriteFile(cpPath(dir), old, 0o600) // as if the second run never closed cleanly
			editUsed(t, dir, 4)
		}, ErrCorrupt, "line 5: record hash does not match", 0},
		{"records after an older checkpoint are replayed", func(t *testing.T, dir string) {
			reserveN(t, dir, 3)
			old, _ := os.ReadFile(cpPath(dir))
			reserveN(t, dir, 2)
			os.WriteFile(cpPath(dir), old, 0o600)
		}, nil, "", 5},
		{"an edit before the checkpoint cannot lower the count", func(t *testing.T, dir string) {
			reserveN(t, dir, 3)
			editUsed(t, dir, 3) // planlock audit verify reports it
		}, nil, "", 3},
		{"garbage checkpoint is refused", func(t *testing.T, dir string) {
			reserveN(t, dir, 3)
			os.WriteFile(cpPath(dir), []byte("{not json"), 0o600)
		}, ErrCheckpoint, "checkpoint.json: not valid JSON", 0},
		{"checkpoint counts edited to 0 are refused", func(t *testing.T, dir string) {
			reserveN(t, dir, 3)
			editFile(t, cpPath(dir), `"used":[3]`, `"used":[0]`)
		}, ErrCheckpoint, "checkpoint.json: its state is not the one checkpoint record 4 of the audit log vouches for: it was edited", 0},
		{"checkpoint hold edited to approved is refused", func(t *testing.T, dir string) {
			l := openT(t, Options{Dir: dir})
			l.closeCheckpointMin = 1
			if _, err := l.Hold(ctx, call("a", 0, "t", `{"n":1}`), "approval", time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			editFile(t, cpPath(dir), `"state":"pending"`, `"state":"approved"`)
		}, ErrCheckpoint, "it was edited", 0},
		{"checkpoint of an older planlock (not bound to the journal) is refused", func(t *testing.T, dir string) {
			reserveN(t, dir, 3)
			editFile(t, cpPath(dir), `"version":2,`, ``)
		}, ErrCheckpoint, "version 0, not 2", 0},
		{"checkpoint naming a record that is not a checkpoint record is refused", func(t *testing.T, dir string) {
			reserveN(t, dir, 3)
			data, _ := os.ReadFile(filepath.Join(dir, auditName))
			lines := bytes.SplitAfter(data, []byte("\n"))
			var cp checkpoint
			json.Unmarshal(mustRead(t, cpPath(dir)), &cp)
			cp.Records, cp.Head, cp.LastStart = 3, lineHash(bytes.TrimSuffix(lines[2], []byte("\n"))), int64(len(lines[0])+len(lines[1]))
			cp.Offset = cp.LastStart + int64(len(lines[2]))
			b, _ := json.Marshal(cp)
			os.WriteFile(cpPath(dir), b, 0o600)
		}, ErrCheckpoint, "record 3 of the audit log is not a checkpoint record", 0},
		{"checkpoint of a truncated journal is refused", func(t *testing.T, dir string) {
			reserveN(t, dir, 3)
			dropLines(t, dir, 2)
		}, ErrTruncated, "the audit log was truncated", 0},
		{"truncated journal without checkpoint is refused by its anchor", func(t *testing.T, dir string) {
			reserveN(t, dir, 3)
			os.Remove(cpPath(dir))
			dropLines(t, dir, 2)
		}, ErrTruncated, "truncated: the audit log has 2 records but its anchor says 4", 0},
		{"forged checkpoint with its record rehashed is refused by the anchor", func(t *testing.T, dir string) {
			reserveN(t, dir, 3)
			// Zero the counts and rewrite the checkpoint record to vouch
			// for it: the chain holds (it is the last record), the anchor
			// does not.
			editFile(t, cpPath(dir), `"used":[3]`, `"used":[0]`)
			var cp checkpoint
			json.Unmarshal(mustRead(t, cpPath(dir)), &cp)
			sum := sha256.Sum256(cp.State)
			path := filepath.Join(dir, auditName)
			data, _ := os.ReadFile(path)
			lines := bytes.SplitAfter(data, []byte("\n"))
			last := lines[3]
			var rec parsed
			json.Unmarshal(last, &rec)
			last = bytes.Replace(last, []byte(rec.StateSHA), []byte(hex.EncodeToString(sum[:])), 1)
			last = rehash(last)
			lines[3] = last
			os.WriteFile(path, bytes.Join(lines, nil), 0o600)
			cp.Head = lineHash(bytes.TrimSuffix(last, []byte("\n")))
			cp.Offset = cp.LastStart + int64(len(last))
			b, _ := json.Marshal(cp)
			os.WriteFile(cpPath(dir), b, 0o600)
		}, ErrAnchor, "rewritten: record 4 has hash", 0},
		{"damaged anchor is refused", func(t *testing.T, dir string) {
			reserveN(t, dir, 3)
			os.WriteFile(filepath.Join(dir, anchorName), []byte("seq=1"), 0o600)
		}, ErrAnchor, "holds no valid head", 0},
		{"missing anchor is refused", func(t *testing.T, dir string) {
			reserveN(t, dir, 3)
			os.Remove(filepath.Join(dir, anchorName))
		}, ErrAnchor, "is missing, and deleting it is how a truncation of the log would be hidden", 0},
		{"missing anchor of an empty journal is refused once the directory was used", func(t *testing.T, dir string) {
			reserveN(t, dir, 0)
			os.Remove(filepath.Join(dir, anchorName))
		}, ErrAnchor, "(0 records) is missing", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.setup(t, dir)
			l, err := Open(ctx, Options{Dir: dir})
			if tt.wantIs != nil {
				if !errors.Is(err, tt.wantIs) || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "refusing to start") && !strings.Contains(err.Error(), "nothing is forwarded") {
					t.Fatalf("Open: %v, want %v with %q", err, tt.wantIs, tt.wantErr)
				}
				// A read-only look (holds list) reads a journal without
				// an anchor, and refuses the rest as Open does.
				if _, err := Inspect(ctx, Options{Dir: dir}); !errors.Is(err, tt.wantIs) && !strings.Contains(tt.wantErr, "is missing") {
					t.Fatalf("Inspect: %v, want %v", err, tt.wantIs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if got := l.Progress(digest).Calls(0); got != tt.wantCalls {
				t.Fatalf("calls %d, want %d", got, tt.wantCalls)
			}
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The checkpoint written at Close must be exactly the state a full replay
// rebuilds, whatever happened.
func TestCheckpointMatchesReplay(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	l := openT(t, Options{Dir: dir})
	l.checkpointEvery = 37 // also checkpoint while running
	rng := rand.New(rand.NewPCG(1, 2))
	var holds []string
	holdCall := map[string]Call{}
	for i := 0; i < 400; i++ {
		step := rng.IntN(4)
		c := Call{PlanDigest: []string{"sha256:a", "sha256:b"}[rng.IntN(2)], Step: "s" + strconv.Itoa(step), StepIndex: step,
			Tool: "t" + strconv.Itoa(step), Args: json.RawMessage(`{"n":` + strconv.Itoa(rng.IntN(3)) + `}`)}
		switch rng.IntN(6) {
		case 0, 1:
			max := 20
			if step == 3 {
				max = 100_000 // counted in leases
			}
			tk, err := l.Reserve(ctx, Reservation{Call: c, MaxCalls: max})
			if err == nil {
				_ = l.Complete(ctx, tk, Outcome{OK: rng.IntN(2) == 0, HoldStep: rng.IntN(5) == 0})
			}
		case 2:
			_ = l.Block(ctx, c, "blocked")
		case 3:
			if h, err := l.Hold(ctx, c, "held", time.Now().Add(time.Duration(rng.IntN(3)-1)*time.Hour)); err == nil {
				holds = append(holds, h.ID)
				holdCall[h.ID] = c
			}
		case 4:
			if len(holds) > 0 {
				st := []HoldState{HoldApproved, HoldRejected, ""}[rng.IntN(3)]
				_, _ = l.UpdateHold(ctx, holds[rng.IntN(len(holds))], HoldUpdate{State: st, PRURL: "https://x/pull/" + strconv.Itoa(i)})
			}
		case 5:
			if len(holds) > 0 {
				id := holds[rng.IntN(len(holds))]
				_, _ = l.Reserve(ctx, Reservation{Call: holdCall[id], MaxCalls: 20, HoldID: id, OverLimit: rng.IntN(2) == 0})
			}
			_ = l.LoadPlan(ctx, PlanLoad{Name: "p" + strconv.Itoa(step), SignedAt: time.Unix(int64(rng.IntN(1000)), 0)})
		}
	}
	// The last checkpoint taken while running: what a crash now would
	// start from, replaying the records after it.
	running, err := os.ReadFile(filepath.Join(dir, checkpointName))
	if err != nil {
		t.Fatalf("no checkpoint while running: %v", err)
	}
	var rcp checkpoint
	if err := json.Unmarshal(running, &rcp); err != nil || rcp.Records < 37 || uint64(rcp.Records) >= l.Stats().Records {
		t.Fatalf("running checkpoint at record %d of %d (%v)", rcp.Records, l.Stats().Records, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	stateJSON := func() string {
		s, err := Inspect(ctx, Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		cp := s.st.checkpoint()
		b, _ := json.Marshal(cp)
		return string(b)
	}
	fromCheckpoint := stateJSON()
	if err := os.WriteFile(filepath.Join(dir, checkpointName), running, 0o600); err != nil {
		t.Fatal(err)
	}
	fromRunning := stateJSON()
	os.Remove(filepath.Join(dir, checkpointName))
	full := stateJSON()
	if full != fromCheckpoint {
		t.Fatalf("state from the checkpoint of Close differs from a full replay:\n%.2000s\n%.2000s", fromCheckpoint, full)
	}
	if full != fromRunning {
		t.Fatalf("state from a running checkpoint plus the tail differs from a full replay:\n%.2000s\n%.2000s", fromRunning, full)
	}
	if !strings.Contains(fromCheckpoint, `"consumed"`) || !strings.Contains(fromCheckpoint, `"held":[`) || !strings.Contains(fromRunning, `"leased":[`) {
		t.Fatalf("the random run did not reach consumed holds and step holds: %.300s", fromCheckpoint)
	}
}

func TestInspectWhileOpen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	l := openT(t, Options{Dir: dir, AuditPath: filepath.Join(t.TempDir(), "elsewhere.jsonl")})
	h, err := l.Hold(ctx, call("email", 2, "send_email", `{"to":"x"}`), "approval = each", time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	tk, err := l.Reserve(ctx, Reservation{Call: call("a", 0, "t", ""), MaxCalls: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Inspect finds the journal through the binding, without the lock.
	s, err := Inspect(ctx, Options{Dir: dir})
	if err != nil {
		t.Fatalf("Inspect while the ledger is open: %v", err)
	}
	if g, ok := s.GetHold(h.ID); !ok || g.State != HoldPending {
		t.Fatalf("snapshot hold %+v %v", g, ok)
	}
	if s.Progress(digest).Calls(0) != 1 || s.AuditPath() != l.AuditPath() || len(s.ListHolds()) != 1 {
		t.Fatalf("snapshot: calls %d path %s holds %d", s.Progress(digest).Calls(0), s.AuditPath(), len(s.ListHolds()))
	}
	_ = tk
	if _, err := Inspect(ctx, Options{Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Inspect of an empty dir: %v", err)
	}
}

func TestDefaultDir(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/xdg/state")
	if d, _ := DefaultDir(); d != "/xdg/state/planlock" {
		t.Fatalf("with XDG_STATE_HOME: %s", d)
	}
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "/home/u")
	if d, _ := DefaultDir(); d != "/home/u/.local/state/planlock" {
		t.Fatalf("without XDG_STATE_HOME: %s", d)
	}
}

func TestCanonicalArgs(t *testing.T) {
	tests := []struct{ in, want string }{
		{``, `{}`},
		{`null`, `{}`},
		{` { "b" : 1, "a" : [ 1 , 2 ] } `, `{"a":[1,2],"b":1}`},
		{`{"n":30.0}`, `{"n":30}`},
		{`{"n":3e1}`, `{"n":30}`},
		{`{"n":-0}`, `{"n":0}`},
		{`{"n":0.1}`, `{"n":0.1}`},
		{`{"n":123456789012345678901234567890}`, `{"n":123456789012345678901234567890}`},
		// Exact, so an approval binds to this number and no other.
		{`{"n":30.000000000000000001}`, `{"n":30.000000000000000001}`},
		{`{"n":1e21}`, `{"n":1000000000000000000000}`},
		{`{"s":"<&>\u00e9"}`, `{"s":"<&>é"}`},
		{`{"o":{"z":null,"a":true}}`, `{"o":{"a":true,"z":null}}`},
	}
	for _, tt := range tests {
		got, err := CanonicalArgs(json.RawMessage(tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("CanonicalArgs(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{`{`, `{} {}`, `nope`} {
		if _, err := CanonicalArgs(json.RawMessage(bad)); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("CanonicalArgs(%s): err %v, want ErrInvalidArgument", bad, err)
		}
	}
}

func TestStepHold(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	l := openT(t, Options{Dir: dir, FlushInterval: time.Hour})
	c := call("refund", 1, "refund_customer", `{"amount":30}`)
	tk, err := l.Reserve(ctx, Reservation{Call: c, MaxCalls: 3})
	if err != nil {
		t.Fatal(err)
	}
	syncs := l.Stats().Syncs
	if err := l.Complete(ctx, tk, Outcome{OK: false, Err: "upstream 500", HoldStep: true}); err != nil {
		t.Fatal(err)
	}
	if l.Stats().Syncs != syncs+1 {
		t.Fatal("an outcome that holds the step was not synced before Complete returned")
	}
	if p := l.Progress(digest); !p.Held(1) || p.Held(0) || p.Done(1) {
		t.Fatalf("held(1) %v held(0) %v done(1) %v; want true false false", p.Held(1), p.Held(0), p.Done(1))
	}
	l.Close()

	l = openT(t, Options{Dir: dir})
	if !l.Progress(digest).Held(1) {
		t.Fatal("step hold lost over restart")
	}
	var sawHeld bool
	// An ordinary reservation does not release it (the gate's Check sees it).
	if _, err := l.Reserve(ctx, Reservation{Call: c, MaxCalls: 3, Check: func(p Progress) error { sawHeld = p.Held(1); return nil }}); err != nil || !sawHeld {
		t.Fatalf("Check saw held %v, err %v", sawHeld, err)
	}
	h, err := l.Hold(ctx, c, "on_error = hold", time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.UpdateHold(ctx, h.ID, HoldUpdate{State: HoldApproved}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Reserve(ctx, Reservation{Call: c, MaxCalls: 3, HoldID: h.ID}); err != nil {
		t.Fatal(err)
	}
	if l.Progress(digest).Held(1) {
		t.Fatal("consuming an approved hold did not release the step")
	}
	l.Close()
	if openT(t, Options{Dir: dir}).Progress(digest).Held(1) {
		t.Fatal("release lost over restart")
	}
}
