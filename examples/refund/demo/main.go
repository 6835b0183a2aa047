// Command demo tells the whole planlock story on this machine, with no
// Docker and no network: a plans repository (a bare Git repository as
// origin), the refund plan approved by merging its branch, signed with a
// local key as CI would, the proxy in front of the example refund server,
// and a scripted agent that tries things the plan allows and things it does
// not. It prints each step in plain words and exits non-zero when any
// outcome differs from the expected one.
//
//	go run ./examples/refund/demo [--keep]
//
// Run it from the repository: it builds planlock and the refund server with
// the go command into a temporary directory.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	keep := flag.Bool("keep", false, "keep the temporary directory (repositories, state, audit log, calls log) and print its path")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The story on stdout; the build's progress on stderr.
	if err := run(ctx, os.Stdout, options{Keep: *keep, Progress: os.Stderr}); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}
