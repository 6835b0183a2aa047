package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/internal/testkit/peers"
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

// TestStdioSessionRequests: planlock's requests to a legacy stdio client
// (elicitation, sampling, roots) get the client's result by id; an error
// response, a response to no request, a request the client never answers
// and a session that ends each fail that request alone, with the reason.
func TestStdioSessionRequests(t *testing.T) {
	var buf peers.SyncBuffer
	sess := &stdioSession{pending: map[int64]chan clientResponse{}, w: &messageWriter{out: &buf, log: io.Discard}}
	sent := func() json.RawMessage { // the id of the last request written
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			if len(lines) > 0 && json.Unmarshal([]byte(lines[len(lines)-1]), &m) == nil && m.ID != nil {
				return m.ID
			}
			if time.Now().After(deadline) {
				t.Fatal("no request written")
			}
			time.Sleep(time.Millisecond)
		}
	}
	ctx := context.Background()
	for _, tt := range []struct {
		name    string
		respond func(id json.RawMessage)
		want    string // "" success
	}{
		{"result", func(id json.RawMessage) {
			sess.deliver(id, clientResponse{Result: json.RawMessage(`{"action":"accept","content":{"ok":true}}`)})
		}, ""},
		{"error", func(id json.RawMessage) {
			r := clientResponse{}
			r.Error = &struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}{-32601, "no elicitation here"}
			sess.deliver(id, r)
		}, "the client answered error -32601: no elicitation here"},
		{"bad result", func(id json.RawMessage) {
			sess.deliver(id, clientResponse{Result: json.RawMessage(`"not an object"`)})
		}, "the client's result"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			buf.Reset()
			done := make(chan error, 1)
			go func() {
				res, err := sess.RequestElicitation(ctx, mcp.ElicitationRequest{Params: mcp.ElicitationParams{Message: "sure?"}})
				if err == nil && res.Action != mcp.ElicitationResponseActionAccept {
					err = fmt.Errorf("result %+v", res)
				}
				done <- err
			}()
			id := sent()
			if !strings.Contains(buf.String(), `"method":"elicitation/create"`) {
				t.Fatalf("wrote %s", buf.String())
			}
			tt.respond(id)
			err := <-done
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
			if sess.deliver(id, clientResponse{Result: json.RawMessage(`{}`)}) {
				t.Error("a second response to the same id was taken")
			}
		})
	}
	if sess.deliver(json.RawMessage(`999`), clientResponse{Result: json.RawMessage(`{}`)}) || sess.deliver(json.RawMessage(`"x"`), clientResponse{}) {
		t.Error("a response to no request was taken")
	}
	// Never answered: the request's context ends it.
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := sess.ListRoots(cctx, mcp.ListRootsRequest{}); err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Errorf("unanswered: %v", err)
	}
	// The session ends: a waiting request fails, later ones at once.
	done := make(chan error, 1)
	buf.Reset()
	go func() {
		_, err := sess.RequestSampling(ctx, mcp.CreateMessageRequest{CreateMessageParams: mcp.CreateMessageParams{MaxTokens: 5}})
		done <- err
	}()
	sent()
	sess.end()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "ended before it answered") {
		t.Errorf("ended: %v", err)
	}
	if _, err := sess.ListRoots(ctx, mcp.ListRootsRequest{}); err == nil || !strings.Contains(err.Error(), "has ended") {
		t.Errorf("after the end: %v", err)
	}
}
