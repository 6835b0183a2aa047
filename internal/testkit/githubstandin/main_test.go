package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Like the real server, the stand-in needs its token; bad invocations fail
// with one clear line.
func TestRunRefusesBadStarts(t *testing.T) {
	tests := []struct {
		name, token string
		args        []string
		want        string
	}{
		{"no token", "", nil, TokenEnv + " is not set"},
		{"stray argument", "t", []string{"extra"}, "unexpected arguments: [extra]"},
		{"unwritable calls log", "t", []string{"--calls-log", "/nonexistent/dir/calls.jsonl"}, "open calls log: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(TokenEnv, tc.token)
			var out, errw bytes.Buffer
			err := run(context.Background(), tc.args, strings.NewReader(""), &out, &errw)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
