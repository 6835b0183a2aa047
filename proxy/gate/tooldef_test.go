package gate

import (
	"strings"
	"testing"
	"time"
)

// TestDecideToolChanged: a call of a tool whose definition differs from
// its tool_pin is held (on_violation = "hold") or blocked, whatever else
// the call does, and an approval does not let it run.
func TestDecideToolChanged(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	const why = `tool "b": definition changed`
	changed := func(tool string) (string, bool) { return why, tool == "b" }
	tests := []struct {
		name, onViolation, x string
		hold                 *BoundHold
		wantKind             Kind
		wantCauses           string
		wantReason           string
	}{
		{"blocked", "block", "1", nil, KindBlock, "", why},
		{"held", "hold", "1", nil, KindHold, "violation:tool_definition", why},
		{"held with bad args too", "hold", "2", nil, KindHold, "violation:tool_definition,violation:args", why},
		{"approved hold does not lift it", "hold", "1",
			&BoundHold{ID: "h1", State: HoldApproved, Causes: Causes{ViolationCause(RuleToolDefinition)}, StepIndex: 1, Step: "target"},
			KindBlock, "", "hold h1 is approved, but " + why + "; the new definition needs a new plan"},
		{"approval of another cause does not lift it", "hold", "2",
			&BoundHold{ID: "h2", State: HoldApproved, Causes: Causes{ViolationCause(RuleArgs)}, StepIndex: 1, Step: "target"},
			KindHold, "violation:tool_definition,violation:args", why},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := New(matrixPlan(t, "any", tt.onViolation, "", false))
			d := g.Decide(Input{Now: now, Tool: "b", Args: map[string]any{"x": jsonNum(tt.x)}, Progress: prog{},
				ToolChanged: changed, Hold: func() *BoundHold { return tt.hold }})
			if d.Kind != tt.wantKind {
				t.Fatalf("kind %d, want %d (%+v)", d.Kind, tt.wantKind, d)
			}
			switch d.Kind {
			case KindBlock:
				if d.Block.Rule != RuleToolDefinition || !strings.HasPrefix(d.Block.Reason, tt.wantReason) {
					t.Fatalf("block %q %q, want rule tool_definition, reason %q", d.Block.Rule, d.Block.Reason, tt.wantReason)
				}
			case KindHold:
				if d.Hold.Causes.String() != tt.wantCauses || d.Hold.Reason != tt.wantReason {
					t.Fatalf("hold %q %q, want %q %q", d.Hold.Causes, d.Hold.Reason, tt.wantCauses, tt.wantReason)
				}
			}
		})
	}
	// Another tool's changed definition does not touch this one.
	g := New(matrixPlan(t, "any", "block", "", false))
	d := g.Decide(Input{Now: now, Tool: "a", Args: map[string]any{}, Progress: prog{}, ToolChanged: changed})
	if d.Kind != KindForward {
		t.Fatalf("a call of an unchanged tool: kind %d", d.Kind)
	}
}
