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
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/planlock/planlock/internal/mcpserve"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "refund server: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, in io.Reader, out, errw io.Writer) error {
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
