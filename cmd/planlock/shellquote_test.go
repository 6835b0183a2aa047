package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCommandLineOfRoundTrips: the command line planlock prints for a user
// to run reads back, through a real shell, as exactly the same words.
func TestCommandLineOfRoundTrips(t *testing.T) {
	tests := [][]string{
		{"planlock", "proxy", "--plan", "/tmp/p.hcl"},
		{"planlock", "proxy", "--plan", "/tmp/with space/p.hcl"},
		{"x", "$HOME", "a\\b", `"quoted"`, "it's", "", "tab\there", "new\nline", "*", "~", "a;b", "$(id)", "`id`"},
	}
	for _, args := range tests {
		line := commandLineOf(args)
		got, err := exec.Command("sh", "-c", "set -- "+line+`; for a in "$@"; do printf '%s\0' "$a"; done`).Output()
		if err != nil {
			t.Fatalf("sh -c %q: %v", line, err)
		}
		words := strings.Split(strings.TrimSuffix(string(got), "\x00"), "\x00")
		if strings.Join(words, "\x00") != strings.Join(args, "\x00") {
			t.Errorf("%q read back as %q", line, words)
		}
	}
}
