package main

import (
	"strings"
	"testing"

	"github.com/planlock/planlock/proxy/ledger"
)

// TestWriteHoldShowsCauseAndPin: holds show names what a hold stands for
// and the pin value read next to the plan's, and prints neither line for a
// hold recorded before causes were.
func TestWriteHoldShowsCauseAndPin(t *testing.T) {
	tests := []struct {
		name string
		h    ledger.Hold
		want []string
		not  []string
	}{
		{"with cause and pin", ledger.Hold{ID: "h1", Cause: "approval,pin", ObservedPin: "0c1f2e3d4b5a6978"},
			[]string{"cause:", "approval,pin", "observed pin:", "0c1f2e3d4b5a6978"}, nil},
		{"legacy", ledger.Hold{ID: "h2"}, nil, []string{"cause:", "observed pin:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			writeHold(&b, tt.h)
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("missing %q in:\n%s", w, b.String())
				}
			}
			for _, w := range tt.not {
				if strings.Contains(b.String(), w) {
					t.Errorf("unexpected %q in:\n%s", w, b.String())
				}
			}
		})
	}
}
