package refundserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// The refund server is also exercised over real stdio and HTTP by the official
// TypeScript SDK client in internal/peers; these in-process tests cover its
// business answers and failure paths cheaply.

func startClient(t *testing.T, cfg Config) *client.Client {
	t.Helper()
	s, closeLog, err := NewServer(cfg)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(func() { _ = closeLog() })
	c, err := client.NewInProcessClient(s)
	if err != nil {
		t.Fatalf("in-process client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return c
}

func call(t *testing.T, c *client.Client, tool string, args map[string]any) (text string, isError bool) {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	var b strings.Builder
	for _, content := range res.Content {
		if tc, ok := content.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

func TestTools(t *testing.T) {
	c := startClient(t, Config{})
	tests := []struct {
		name     string
		tool     string
		args     map[string]any
		wantErr  bool
		contains string
	}{
		{"known order", "get_order", map[string]any{"order_id": "4711"}, false, `"customer_email":"customer-4711@example.com"`},
		{"unknown order", "get_order", map[string]any{"order_id": "9999"}, true, `order "9999" not found`},
		{"refund within total", "refund_customer", map[string]any{"order_id": "4711", "amount": 30, "currency": "EUR"}, false, `"status":"refunded"`},
		{"refund with note", "refund_customer", map[string]any{"order_id": "4711", "amount": 5.5, "currency": "EUR", "note": "sorry"}, false, `"note":"sorry"`},
		{"refund above total", "refund_customer", map[string]any{"order_id": "4711", "amount": 300, "currency": "EUR"}, true, "outside 0..89.90"},
		{"refund wrong currency", "refund_customer", map[string]any{"order_id": "4711", "amount": 3, "currency": "USD"}, true, "is in EUR, not USD"},
		{"refund amount as string", "refund_customer", map[string]any{"order_id": "4711", "amount": "30", "currency": "EUR"}, true, "input schema validation failed"},
		{"refund undeclared argument", "refund_customer", map[string]any{"order_id": "4711", "amount": 3, "currency": "EUR", "force": true}, true, "input schema validation failed"},
		{"refund missing currency", "refund_customer", map[string]any{"order_id": "4711", "amount": 3}, true, "input schema validation failed"},
		{"email", "send_email", map[string]any{"to": "customer-4711@example.com", "body": "hi"}, false, `"status":"sent"`},
		{"close known ticket", "close_ticket", map[string]any{"ticket_id": "T-4711", "comment": "done"}, false, `"status":"closed"`},
		{"close unknown ticket", "close_ticket", map[string]any{"ticket_id": "T-1", "comment": "x"}, true, `ticket "T-1" not found`},
		{"default script hash", "get_script_by_path", map[string]any{"path": "f/support/refund_customer"}, false, `{"hash":"9f86d081884c7d65","path":"f/support/refund_customer"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, isErr := call(t, c, tt.tool, tt.args)
			if isErr != tt.wantErr || !strings.Contains(text, tt.contains) {
				t.Fatalf("got isError=%v %q; want isError=%v containing %q", isErr, text, tt.wantErr, tt.contains)
			}
		})
	}
}

func TestToolSchemasAreStrict(t *testing.T) {
	c := startClient(t, Config{})
	res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("list tools: %v", err)
	}
	want := map[string]bool{"get_order": true, "refund_customer": true, "send_email": true, "close_ticket": true, "get_script_by_path": true}
	if len(res.Tools) != len(want) {
		t.Fatalf("got %d tools, want %d", len(res.Tools), len(want))
	}
	for _, tool := range res.Tools {
		if !want[tool.Name] {
			t.Errorf("unexpected tool %q", tool.Name)
		}
		b, err := json.Marshal(tool)
		if err != nil {
			t.Fatal(err)
		}
		var raw struct {
			InputSchema struct {
				AdditionalProperties *bool    `json:"additionalProperties"`
				Required             []string `json:"required"`
			} `json:"inputSchema"`
		}
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatal(err)
		}
		if raw.InputSchema.AdditionalProperties == nil || *raw.InputSchema.AdditionalProperties {
			t.Errorf("%s: additionalProperties is not false", tool.Name)
		}
		if len(raw.InputSchema.Required) == 0 {
			t.Errorf("%s: no required arguments", tool.Name)
		}
	}
}

func TestHashFileIsReadOnEveryCall(t *testing.T) {
	hashFile := filepath.Join(t.TempDir(), "hash")
	if err := os.WriteFile(hashFile, []byte("aaaa\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startClient(t, Config{HashFile: hashFile})
	args := map[string]any{"path": "f/support/refund_customer"}
	if text, isErr := call(t, c, "get_script_by_path", args); isErr || !strings.Contains(text, `"hash":"aaaa"`) {
		t.Fatalf("first read: isError=%v %q", isErr, text)
	}
	if err := os.WriteFile(hashFile, []byte("bbbb"), 0o644); err != nil {
		t.Fatal(err)
	}
	if text, isErr := call(t, c, "get_script_by_path", args); isErr || !strings.Contains(text, `"hash":"bbbb"`) {
		t.Fatalf("after change: isError=%v %q", isErr, text)
	}
	if err := os.Remove(hashFile); err != nil {
		t.Fatal(err)
	}
	if text, isErr := call(t, c, "get_script_by_path", args); !isErr || !strings.Contains(text, "read script") {
		t.Fatalf("missing hash file: isError=%v %q; want a tool error", isErr, text)
	}
}

func TestCallsLogRecordsEveryCall(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "calls.jsonl")
	c := startClient(t, Config{CallsLog: logPath})
	call(t, c, "get_order", map[string]any{"order_id": "4711"})
	call(t, c, "refund_customer", map[string]any{"order_id": "4711", "amount": "bad", "currency": "EUR"})
	// A call to a tool the server does not have still reached it: logged.
	req := mcp.CallToolRequest{}
	req.Params.Name = "drop_database"
	if _, err := c.CallTool(context.Background(), req); err == nil {
		t.Fatal("unknown tool: want a JSON-RPC error")
	}

	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var got []CallRecord
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var r CallRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("bad log line %q: %v", sc.Text(), err)
		}
		got = append(got, r)
	}
	want := []struct{ tool, args string }{
		{"get_order", `{"order_id":"4711"}`},
		{"refund_customer", `{"amount":"bad","currency":"EUR","order_id":"4711"}`},
		{"drop_database", `null`},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d:\n%s", len(got), len(want), b)
	}
	for i, w := range want {
		if got[i].Tool != w.tool || string(got[i].Arguments) != w.args || got[i].Time.IsZero() {
			t.Errorf("record %d = %s %s; want %s %s", i, got[i].Tool, got[i].Arguments, w.tool, w.args)
		}
	}
}

func TestRunRejectsBadUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--nope"}, "flag provided but not defined"},
		{"positional", []string{"extra"}, "unexpected arguments"},
		{"calls log in missing dir", []string{"--calls-log", filepath.Join(t.TempDir(), "no", "such", "f")}, "open calls log"},
		{"bad listen address", []string{"--http", "256.0.0.1:x"}, "listen on"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var errw bytes.Buffer
			err := Run(context.Background(), tt.args, strings.NewReader(""), &bytes.Buffer{}, &errw)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run(%v) = %v; want error containing %q", tt.args, err, tt.want)
			}
		})
	}
}
