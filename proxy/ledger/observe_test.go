package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Observed calls are recorded but never counted, also after a reopen.
func TestObserveRecordsWithoutCounting(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l, err := Open(ctx, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	c := Call{PlanDigest: "sha256:p", Step: "s", StepIndex: 0, Tool: "t", Args: json.RawMessage(`{"a":1}`)}
	for _, d := range []string{WouldAllow, WouldBlock, WouldHold} {
		if err := l.Observe(ctx, c, d, "why"); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Observe(ctx, c, "allow", ""); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("observe with decision allow: %v", err)
	}
	if err := l.Observe(ctx, Call{PlanDigest: "sha256:p", Tool: "t", Args: json.RawMessage(`{`)}, WouldBlock, ""); err == nil {
		t.Fatal("observe with arguments that are not JSON was recorded")
	}
	if p := l.Progress("sha256:p"); p.Calls(0) != 0 || p.Done(0) {
		t.Fatalf("observed calls were counted: %d", p.Calls(0))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(ctx, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if p := l.Progress("sha256:p"); p.Calls(0) != 0 {
		t.Fatalf("replayed observed calls were counted: %d", p.Calls(0))
	}
	f, err := os.Open(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if res, err := Verify(f); err != nil || res.Records < 3 {
		t.Fatalf("verify: %v, %d records", err, res.Records)
	}
}
