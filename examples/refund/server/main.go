// Command server plays the refund system of planlock's example plan: an MCP
// server with get_order, refund_customer, send_email, close_ticket and
// get_script_by_path. It is the upstream of the refund demo and of the proxy
// tests.
//
//	server [--http ADDR] [--hash-file F] [--calls-log F]
//
// Stdio by default; with --http it serves streamable HTTP at http://ADDR/mcp
// (port 0 picks a free port; the URL is printed on stderr). get_script_by_path
// reports the hash read from --hash-file on every call, so a colleague can
// change the script under a running plan. Every tools/call received is
// appended to --calls-log as one JSON line.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/planlock/planlock/internal/refundserver"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := refundserver.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "refund server: %v\n", err)
		os.Exit(1)
	}
}
