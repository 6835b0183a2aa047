// Package refundserver is the refund system of planlock's example plan (the
// MCP server of examples/refund/server), importable so that tests can run it
// without building the command.
package refundserver

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/planlock/planlock/internal/mcpserve"
)

// DefaultHash is the refund script's hash when no hash file is given; it is
// the value the example plan pins.
const DefaultHash = "9f86d081884c7d65"

// Config selects the run-time inputs of the refund server.
type Config struct {
	HashFile string // re-read on every get_script_by_path; "" = DefaultHash
	CallsLog string // JSON Lines file of every tools/call received; "" = none
}

// CallRecord is one line of the calls log.
type CallRecord struct {
	Time      time.Time       `json:"time"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

type order struct {
	OrderID       string  `json:"order_id"`
	CustomerEmail string  `json:"customer_email"`
	Total         float64 `json:"total"`
	Currency      string  `json:"currency"`
	Status        string  `json:"status"`
	TicketID      string  `json:"ticket_id"`
}

// orders is the little shop behind the server: 4711 is the example's order,
// 4712 another customer's, so a plan bound to 4711 has something to refuse.
var orders = map[string]order{
	"4711": {OrderID: "4711", CustomerEmail: "customer-4711@example.com", Total: 89.90, Currency: "EUR", Status: "delivered", TicketID: "T-4711"},
	"4712": {OrderID: "4712", CustomerEmail: "customer-4712@example.com", Total: 420.00, Currency: "EUR", Status: "delivered", TicketID: "T-4712"},
}

// Schemas are written out (not built with mcp.WithX) so they read like a real
// system's: types, descriptions, required, additionalProperties false.
const (
	getOrderSchema = `{
  "type": "object",
  "properties": {
    "order_id": {"type": "string", "description": "Order number, e.g. \"4711\"", "minLength": 1}
  },
  "required": ["order_id"],
  "additionalProperties": false
}`
	refundSchema = `{
  "type": "object",
  "properties": {
    "order_id": {"type": "string", "description": "Order to refund", "minLength": 1},
    "amount": {"type": "number", "description": "Amount to refund", "exclusiveMinimum": 0},
    "currency": {"type": "string", "description": "ISO 4217 currency code", "pattern": "^[A-Z]{3}$"},
    "note": {"type": "string", "description": "Optional note shown to the customer", "maxLength": 1000}
  },
  "required": ["order_id", "amount", "currency"],
  "additionalProperties": false
}`
	sendEmailSchema = `{
  "type": "object",
  "properties": {
    "to": {"type": "string", "description": "Recipient address", "format": "email"},
    "body": {"type": "string", "description": "Plain-text message body"}
  },
  "required": ["to", "body"],
  "additionalProperties": false
}`
	closeTicketSchema = `{
  "type": "object",
  "properties": {
    "ticket_id": {"type": "string", "description": "Support ticket, e.g. \"T-4711\"", "minLength": 1},
    "comment": {"type": "string", "description": "Closing comment"}
  },
  "required": ["ticket_id", "comment"],
  "additionalProperties": false
}`
	getScriptSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "Script path, e.g. \"f/support/refund_customer\"", "minLength": 1}
  },
  "required": ["path"],
  "additionalProperties": false
}`
)

// NewServer builds the refund MCP server. The returned func closes the calls log.
func NewServer(cfg Config) (*server.MCPServer, func() error, error) {
	rec := &recorder{}
	if cfg.CallsLog != "" {
		f, err := os.OpenFile(cfg.CallsLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, nil, fmt.Errorf("open calls log: %w", err)
		}
		rec.f = f
	}
	hooks := &server.Hooks{}
	// The hook runs before tool lookup and argument validation, so the log
	// holds every call that reached this server, valid or not.
	hooks.AddBeforeCallTool(func(ctx context.Context, id any, req *mcp.CallToolRequest) {
		rec.record(req)
	})
	s := server.NewMCPServer("refund-system", "1.0.0",
		server.WithToolCapabilities(false),
		server.WithInputSchemaValidation(),
		server.WithHooks(hooks),
		server.WithRecovery(),
	)
	sh := &shop{hashFile: cfg.HashFile}
	s.AddTool(mcp.NewToolWithRawSchema("get_order", "Look up an order: customer, total, status and support ticket.", json.RawMessage(getOrderSchema)), sh.getOrder)
	s.AddTool(mcp.NewToolWithRawSchema("refund_customer", "Refund an amount of an order to the customer's payment method.", json.RawMessage(refundSchema)), sh.refund)
	s.AddTool(mcp.NewToolWithRawSchema("send_email", "Send a plain-text email.", json.RawMessage(sendEmailSchema)), sh.sendEmail)
	s.AddTool(mcp.NewToolWithRawSchema("close_ticket", "Close a support ticket with a comment.", json.RawMessage(closeTicketSchema)), sh.closeTicket)
	s.AddTool(mcp.NewToolWithRawSchema("get_script_by_path", "Read a deployed automation script's metadata, including its content hash.", json.RawMessage(getScriptSchema)), sh.getScript)
	return s, rec.close, nil
}

type recorder struct {
	mu sync.Mutex
	f  *os.File
}

func (r *recorder) record(req *mcp.CallToolRequest) {
	if r.f == nil {
		return
	}
	args, err := json.Marshal(req.GetRawArguments())
	if err != nil {
		args = []byte("null")
	}
	line, err := json.Marshal(CallRecord{Time: time.Now().UTC(), Tool: req.Params.Name, Arguments: args})
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// One write per line with O_APPEND: a reader never sees half a record.
	_, _ = r.f.Write(append(line, '\n'))
}

func (r *recorder) close() error {
	if r.f == nil {
		return nil
	}
	return r.f.Close()
}

type shop struct {
	hashFile string
	mu       sync.Mutex
	refunds  int
}

func jsonResult(v any) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	return mcp.NewToolResultText(string(b)), nil
}

func (s *shop) getOrder(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	id := req.GetString("order_id", "")
	o, ok := orders[id]
	if !ok {
		return mcp.NewToolResultError(fmt.Sprintf("order %q not found", id)), nil
	}
	return jsonResult(o)
}

func (s *shop) refund(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	id := req.GetString("order_id", "")
	o, ok := orders[id]
	if !ok {
		return mcp.NewToolResultError(fmt.Sprintf("order %q not found", id)), nil
	}
	amount := req.GetFloat("amount", 0)
	currency := req.GetString("currency", "")
	if currency != o.Currency {
		return mcp.NewToolResultError(fmt.Sprintf("order %s is in %s, not %s", id, o.Currency, currency)), nil
	}
	if amount <= 0 || amount > o.Total {
		return mcp.NewToolResultError(fmt.Sprintf("amount %.2f is outside 0..%.2f, the order total", amount, o.Total)), nil
	}
	s.mu.Lock()
	s.refunds++
	n := s.refunds
	s.mu.Unlock()
	return jsonResult(map[string]any{
		"refund_id": fmt.Sprintf("R-%s-%d", id, n),
		"order_id":  id,
		"amount":    amount,
		"currency":  currency,
		"note":      req.GetString("note", ""),
		"status":    "refunded",
	})
}

func (s *shop) sendEmail(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	to := req.GetString("to", "")
	if !strings.Contains(to, "@") {
		return mcp.NewToolResultError(fmt.Sprintf("invalid recipient %q", to)), nil
	}
	return jsonResult(map[string]any{"status": "sent", "to": to, "bytes": len(req.GetString("body", ""))})
}

func (s *shop) closeTicket(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	id := req.GetString("ticket_id", "")
	for _, o := range orders {
		if o.TicketID == id {
			return jsonResult(map[string]any{"ticket_id": id, "status": "closed", "comment": req.GetString("comment", "")})
		}
	}
	return mcp.NewToolResultError(fmt.Sprintf("ticket %q not found", id)), nil
}

func (s *shop) getScript(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	path := req.GetString("path", "")
	hash := DefaultHash
	if s.hashFile != "" {
		b, err := os.ReadFile(s.hashFile)
		if err != nil {
			// A failed read is reported as a tool error, as a real script
			// store would; the proxy must treat it as a failed pin read.
			return mcp.NewToolResultError(fmt.Sprintf("read script %q: %v", path, err)), nil
		}
		hash = strings.TrimSpace(string(b))
	}
	return jsonResult(map[string]string{"path": path, "hash": hash})
}

// Run serves the refund system with the command line args (see
// examples/refund/server) until ctx ends.
func Run(ctx context.Context, args []string, in io.Reader, out, errw io.Writer) error {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(errw)
	httpAddr := fs.String("http", "", "serve streamable HTTP on `ADDR` (e.g. 127.0.0.1:8000) instead of stdio")
	hashFile := fs.String("hash-file", "", "`FILE` holding the refund script's hash, re-read on every get_script_by_path (default hash "+DefaultHash+")")
	callsLog := fs.String("calls-log", "", "append every tools/call received to `FILE` (JSON Lines)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	srv, closeLog, err := NewServer(Config{HashFile: *hashFile, CallsLog: *callsLog})
	if err != nil {
		return err
	}
	defer closeLog()
	return mcpserve.Serve(ctx, srv, mcpserve.Options{HTTPAddr: *httpAddr, Stdin: in, Stdout: out, Log: errw})
}
