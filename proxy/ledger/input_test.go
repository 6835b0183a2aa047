package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"
)

// An input record (a multi-round call's answers) refers to its call's
// allow record, keeps the answers as a call keeps its arguments (only
// their digest when redacted), and changes no count or progress.
func TestInputRecord(t *testing.T) {
	for _, redact := range []bool{false, true} {
		l := openT(t, Options{Dir: t.TempDir(), Redact: redact})
		ctx := context.Background()
		c := call("ask", 0, "ask", `{"q":1}`)
		tk, err := l.Reserve(ctx, Reservation{Call: c, MaxCalls: 1})
		if err != nil {
			t.Fatal(err)
		}
		const answers = `{"password":{"action":"accept","content":{"password":"hunter2-SECRET"}}}`
		ic := c
		ic.Args = json.RawMessage(answers)
		if err := l.Input(ctx, ic, tk.Seq, 1, "answers to password"); err != nil {
			t.Fatal(err)
		}
		// A round is answered once.
		if err := l.Input(ctx, ic, tk.Seq, 1, "answers to password"); !errors.Is(err, ErrRoundAnswered) {
			t.Fatalf("round 1 answered again: %v, want ErrRoundAnswered", err)
		}
		if got := l.Progress(c.PlanDigest).Calls(0); got != 1 {
			t.Fatalf("counted %d, want 1", got)
		}
		path := l.AuditPath()
		rs := readRecordsAfterClose(t, l)
		last := rs[len(rs)-1]
		want, _ := ArgsDigest(json.RawMessage(answers))
		kept := (redact && last.ArgsSHA == want && last.Args == nil) || (!redact && string(last.Args) != "")
		if last.Type != typeInput || last.Ref != tk.Seq || !kept || last.Reason != "round 1: answers to password" {
			t.Fatalf("input record %+v", last.record)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, []byte("SECRET")) != !redact {
			t.Fatalf("redact %v: the journal shows the answers %v:\n%s", redact, !redact, data)
		}
		// Replayed into a fresh state: still one call, and round 1 stays
		// answered (a restart does not make a used requestState good
		// again); round 2 is the next.
		l2 := openT(t, Options{Dir: l.Dir()})
		if got := l2.Progress(c.PlanDigest).Calls(0); got != 1 {
			t.Fatalf("after reopening counted %d, want 1", got)
		}
		if err := l2.Input(ctx, ic, tk.Seq, 1, "answers to password"); !errors.Is(err, ErrRoundAnswered) {
			t.Fatalf("round 1 answered again after reopening: %v, want ErrRoundAnswered", err)
		}
		if err := l2.Input(ctx, ic, tk.Seq, 2, "answers to password"); err != nil {
			t.Fatalf("round 2: %v", err)
		}
		_ = l2.Close()
		// The same journal applied to the state machine of a shared state
		// (another replica reading it) knows both rounds.
		m := NewMachine(redact)
		for _, line := range bytes.Split(bytes.TrimSpace(mustRead(t, path)), []byte("\n")) {
			if err := m.Apply(line); err != nil {
				t.Fatal(err)
			}
		}
		for _, round := range []int{1, 2} {
			if err := m.Input(ic, tk.Seq, round, "answers", time.Now()); !errors.Is(err, ErrRoundAnswered) {
				t.Fatalf("the machine took round %d again: %v", round, err)
			}
		}
		if err := m.Input(ic, tk.Seq, 3, "answers", time.Now()); err != nil {
			t.Fatalf("round 3 on the machine: %v", err)
		}
		if err := m.Input(ic, 0, 1, "answers", time.Now()); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("an input record without its call: %v", err)
		}
	}
}
