package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planlock/planlock/internal/testkit/testbin"
)

// The test binary plays the test upstream when run under that name (see
// TestMain): the tests need no built command. The tests that run the built
// pass-through are in test/e2e.
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

// The floor that syncs journals every line from the client, and passes
// each on (here to cat, which echoes it back) unchanged.
func TestFloorSyncJournalsEachRequest(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "journal")
	in := "{\"id\":1}\n{\"id\":2}\n"
	var out, errw bytes.Buffer
	if err := run(context.Background(), []string{"--floor", "sync", "--floor-journal", journal, "--", "cat"}, strings.NewReader(in), &out, &errw); err != nil {
		t.Fatalf("run: %v (%s)", err, errw.String())
	}
	if out.String() != in {
		t.Errorf("relayed %q, want %q", out.String(), in)
	}
	if b, err := os.ReadFile(journal); err != nil || string(b) != in {
		t.Errorf("journal %q, %v; want %q", b, err, in)
	}
}

func TestFloorRejectsBadModes(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "journal")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--floor", "sync", "--", "cat"}, "--floor-journal goes with --floor sync"},
		{[]string{"--floor", "lines", "--floor-journal", journal, "--", "cat"}, "--floor-journal goes with --floor sync"},
		{[]string{"--floor-journal", journal, "--", "cat"}, "--floor-journal goes with --floor sync"},
		{[]string{"--floor", "bytes", "--", "cat"}, `--floor "bytes": want lines, json or sync`},
		{[]string{"--floor", "sync", "--floor-journal", filepath.Join(journal, "no", "dir"), "--", "cat"}, "no such file or directory"},
	} {
		err := run(context.Background(), tt.args, strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("run(%q) = %v; want an error containing %q", tt.args, err, tt.want)
		}
	}
	if _, err := os.Stat(journal); !os.IsNotExist(err) {
		t.Errorf("a refused run left a journal: %v", err)
	}
}
