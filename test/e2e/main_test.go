//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/planlock/planlock/internal/testkit/leakcheck"
	"github.com/planlock/planlock/internal/testkit/peers"
)

// The commands the tests run, built once in TestMain: the planlock CLI, the
// example refund server (examples/refund/server), the fault-playing test
// upstream (internal/testkit/testupstream), the GitHub MCP server stand-in
// (internal/testkit/githubstandin) and the bare relay (bench/passthrough).
var planlockBin, refundBin, testUpstreamBin, githubBin, passthroughBin string

func TestMain(m *testing.M) {
	// Every process a test starts must be gone when the tests end: the
	// check fails the run, naming any left behind (internal/testkit/leakcheck).
	if err := leakcheck.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "planlock-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins, err := peers.BuildCommands(dir, peers.PkgPlanlock, peers.PkgRefundServer, peers.PkgTestUpstream, peers.PkgGitHubStandIn, peers.PkgPassthrough)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	planlockBin, refundBin, testUpstreamBin = bins[peers.PkgPlanlock], bins[peers.PkgRefundServer], bins[peers.PkgTestUpstream]
	githubBin, passthroughBin = bins[peers.PkgGitHubStandIn], bins[peers.PkgPassthrough]
	code := m.Run()
	if err := leakcheck.Check(leakcheck.Grace); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
