// Package testbin lets a test binary stand in for the repository's small MCP
// servers, the refund example (internal/refundserver) and the fault-playing
// test upstream (internal/testkit/testupstream), so that unit tests run them as
// processes without building a command: TestMain links the test binary under
// their names, and the binary started under one of those names serves as it.
// The end-to-end tests (test/e2e) build the real commands instead.
//
//	func TestMain(m *testing.M) {
//		testbin.Serve() // returns unless started as an upstream
//		bins, cleanup, err := testbin.Link(testbin.Refund, testbin.TestUpstream)
//		...
//	}
package testbin

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/planlock/planlock/internal/refundserver"
	"github.com/planlock/planlock/internal/testkit/testupstream"
)

// The names a test binary serves under.
const (
	Refund       = "refund"       // the refund example server (examples/refund/server)
	TestUpstream = "testupstream" // internal/testkit/testupstream/cmd/testupstream
)

// Serve runs the process as the server it was started as (by name) and
// exits; started under any other name, it returns at once.
func Serve() {
	switch filepath.Base(os.Args[0]) {
	case Refund:
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := refundserver.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintf(os.Stderr, "refund server: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	case TestUpstream:
		testupstream.Main(os.Args[1:])
		os.Exit(0)
	}
}

// Link makes a new temporary directory of links to the running binary, one
// per name, and returns name → path and a cleanup that removes them.
func Link(names ...string) (map[string]string, func(), error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("testbin: %w", err)
	}
	dir, err := os.MkdirTemp("", "planlock-testbin-")
	if err != nil {
		return nil, nil, fmt.Errorf("testbin: %w", err)
	}
	cleanup := func() { os.RemoveAll(dir) }
	paths := make(map[string]string, len(names))
	for _, n := range names {
		paths[n] = filepath.Join(dir, n)
		if err := os.Symlink(self, paths[n]); err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("testbin: %w", err)
		}
	}
	return paths, cleanup, nil
}
