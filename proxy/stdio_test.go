package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/planlock/planlock/proxy/ledger"
)

// TestServeStdioEndsWithItsContext checks that the stdio server returns
// once its context ends although the client neither writes nor closes its
// end, and that a request in progress then is not waited for forever.
func TestServeStdioEndsWithItsContext(t *testing.T) {
	p, _ := newInProcessProxy(t, benchPlan, noState{}, ledger.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	defer pw.Close()
	out, ow := io.Pipe()
	go func() { _, _ = io.Copy(io.Discard, out) }()
	done := make(chan error, 1)
	go func() { done <- p.ServeStdio(ctx, pr, ow) }()
	if _, err := io.WriteString(pw, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeStdio: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeStdio did not return after its context ended")
	}
}

// TestServeStdioAnswersNonObjects checks that JSON that is not an object
// (a batch, a string) gets the MCP server's parse error with a null id, and
// that the messages after it are still served in order.
func TestServeStdioAnswersNonObjects(t *testing.T) {
	p, _ := newInProcessProxy(t, benchPlan, noState{}, ledger.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	defer pw.Close()
	out, ow := io.Pipe()
	go func() { _ = p.ServeStdio(ctx, pr, ow) }()
	go func() {
		_, _ = io.WriteString(pw, "[1,2]\n\"str\"\n"+`{"jsonrpc":"2.0","id":7,"method":"ping"}`+"\n")
	}()
	sc := bufio.NewScanner(out)
	var ids []string
	for len(ids) < 3 && sc.Scan() {
		var r struct {
			ID    json.RawMessage `json:"id"`
			Error *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("proxy wrote non-JSON: %q", sc.Text())
		}
		if string(r.ID) == "null" && (r.Error == nil || r.Error.Code != -32700) {
			t.Errorf("answer %s, want a parse error", sc.Text())
		}
		ids = append(ids, string(r.ID))
	}
	if len(ids) != 3 || ids[0] != "null" || ids[1] != "null" || ids[2] != "7" {
		t.Fatalf("answers for ids %v, want [null null 7]", ids)
	}
}
