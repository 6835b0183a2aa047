package main

import (
	"testing"
)

func TestInGoBuildCache(t *testing.T) {
	for path, want := range map[string]bool{
		"/tmp/go-build3412/b001/exe/planlock": true,
		"/home/u/go/bin/planlock":             false,
		"/usr/local/bin/planlock":             false,
	} {
		if got := inGoBuildCache(path); got != want {
			t.Errorf("inGoBuildCache(%q) = %v, want %v", path, got, want)
		}
	}
}
