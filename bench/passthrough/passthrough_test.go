package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/planlock/planlock/internal/testbin"
)

// The test binary plays the test upstream when run under that name (see
// TestMain): the tests need no built command. The tests that run the built
// pass-through are in internal/e2e.
var testUpstreamBin string

func TestMain(m *testing.M) {
	testbin.Serve()
	bins, cleanup, err := testbin.Link(testbin.TestUpstream)
	if err != nil {
		panic(err)
	}
	testUpstreamBin = bins[testbin.TestUpstream]
	code := m.Run()
	cleanup()
	os.Exit(code)
}

func TestRunRejectsBadUpstreams(t *testing.T) {
	up := testUpstreamBin
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no upstream", nil, "give exactly one upstream"},
		{"both upstreams", []string{"--upstream-url", "http://127.0.0.1:1/mcp", "--", up}, "give exactly one upstream"},
		{"upstream exits at start", []string{"--", up, "--mode", "exit-at-start"}, "initialise upstream"},
		{"upstream unreachable", []string{"--upstream-url", "http://127.0.0.1:1/mcp"}, "upstream"},
		{"unknown flag", []string{"--nope"}, "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var errw bytes.Buffer
			err := run(context.Background(), tt.args, strings.NewReader(""), &bytes.Buffer{}, &errw)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run(%q) = %v; want an error containing %q", tt.args, err, tt.want)
			}
		})
	}
}
