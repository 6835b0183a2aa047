// Command testupstream is the MCP upstream of planlock's fault and benchmark
// tests. See package testupstream for the tools and the modes.
//
//	testupstream [--mode M] [--exit-after N] [--calls-log F] [--conformance] [--http ADDR]
//
// The mode may also come from TESTUPSTREAM_MODE (the flag wins).
package main

import (
	"os"

	"github.com/planlock/planlock/internal/testkit/testupstream"
)

func main() { testupstream.Main(os.Args[1:]) }
