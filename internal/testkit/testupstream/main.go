package testupstream

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Main is the testupstream command (internal/testkit/testupstream/cmd/testupstream)
// with the command line args; it exits the process when it is done. Tests run
// it from their own binary to play the upstream without building the command.
func Main(args []string) {
	fs := flag.NewFlagSet("testupstream", flag.ExitOnError)
	mode := fs.String("mode", os.Getenv("TESTUPSTREAM_MODE"), "fault `mode` to play (default normal)")
	exitAfter := fs.Int("exit-after", 1, "exit-mid-call: exit when the `N`th tools/call arrives")
	callsLog := fs.String("calls-log", "", "append every tools/call received to `FILE` (JSON Lines)")
	httpAddr := fs.String("http", "", "serve streamable HTTP on `ADDR` instead of stdio")
	conformance := fs.Bool("conformance", false, "add the tools the conformance suite's server scenarios call")
	hugeBytes := fs.Int64("huge-bytes", 0, "huge: length of the unending answer line (default 768 MiB)")
	toolsFile := fs.String("tools-file", "", "tool-defs: serve the tool definitions of `FILE` (a JSON array)")
	pidFile := fs.String("pid-file", "", "write the process id to `FILE` once started")
	_ = fs.Parse(args)
	m, err := ParseMode(*mode)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testupstream: %v\n", err)
		os.Exit(2)
	}
	if *pidFile != "" {
		if err := os.WriteFile(*pidFile, []byte(fmt.Sprint(os.Getpid())), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "testupstream: %v\n", err)
			os.Exit(1)
		}
	}
	if m == Deaf {
		// Deaf to everything but SIGKILL, and outlives its stdin.
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
		cfg := Config{Mode: Normal, CallsLog: *callsLog, HTTPAddr: *httpAddr}
		if err := Run(context.Background(), cfg, os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintf(os.Stderr, "testupstream: %v\n", err)
		}
		select {}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The hanging modes keep handlers blocked for good, which would hold a
	// graceful shutdown forever: once asked to stop, leave soon regardless.
	go func() {
		<-ctx.Done()
		time.Sleep(time.Second)
		os.Exit(0)
	}()
	cfg := Config{Mode: m, ExitAfter: *exitAfter, CallsLog: *callsLog, HTTPAddr: *httpAddr, Conformance: *conformance, HugeBytes: *hugeBytes, ToolsFile: *toolsFile}
	if err := Run(ctx, cfg, os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "testupstream: %v\n", err)
		os.Exit(1)
	}
}
