package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"
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
		if err := l.Input(ctx, ic, tk.Seq, "round 1: answers to password"); err != nil {
			t.Fatal(err)
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
		// Replayed into a fresh state: still one call.
		l2 := openT(t, Options{Dir: l.Dir()})
		if got := l2.Progress(c.PlanDigest).Calls(0); got != 1 {
			t.Fatalf("after reopening counted %d, want 1", got)
		}
		_ = l2.Close()
	}
}
