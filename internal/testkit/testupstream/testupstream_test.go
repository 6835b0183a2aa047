package testupstream

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The tools and modes are exercised over real stdio and HTTP by the official
// TypeScript SDK client in internal/peers; these tests cover what needs no peer.

func TestParseMode(t *testing.T) {
	for _, m := range Modes {
		got, err := ParseMode(string(m))
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %q, %v", m, got, err)
		}
	}
	if got, err := ParseMode(""); err != nil || got != Normal {
		t.Errorf(`ParseMode("") = %q, %v; want normal`, got, err)
	}
	if _, err := ParseMode("explode"); err == nil || !strings.Contains(err.Error(), "exit-mid-call") {
		t.Errorf(`ParseMode("explode") = %v; want an error listing the modes`, err)
	}
}

func TestGarbageModeAnswersEveryLineWithNonJSON(t *testing.T) {
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}` + "\n" + `{"jsonrpc":"2.0","id":2,"method":"ping"}` + "\n")
	var out bytes.Buffer
	if err := Run(context.Background(), Config{Mode: Garbage}, in, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if want := GarbageLine + "\n" + GarbageLine + "\n"; out.String() != want {
		t.Fatalf("output %q; want two garbage lines", out.String())
	}
}

func TestExitAtStartExitsBeforeReading(t *testing.T) {
	code := -1
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}` + "\n")
	var out bytes.Buffer
	err := Run(context.Background(), Config{Mode: ExitAtStart, Exit: func(c int) { code = c }}, in, &out, &bytes.Buffer{})
	if err != nil || code != ExitCodeAtStart || out.Len() != 0 || in.Len() == 0 {
		t.Fatalf("err=%v code=%d wrote %q unread=%d; want exit %d before reading or writing", err, code, out.String(), in.Len(), ExitCodeAtStart)
	}
}

func TestRunRejectsUnwritableCallsLog(t *testing.T) {
	err := Run(context.Background(), Config{CallsLog: t.TempDir() + "/no/such/dir/calls"}, strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "open calls log") {
		t.Fatalf("Run = %v; want an open calls log error", err)
	}
}
