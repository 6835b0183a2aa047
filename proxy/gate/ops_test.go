package gate

import (
	"testing"
	"time"

	"github.com/planlock/planlock/hclplan"
)

const opsPlan = `
plan "ops" {
  goal    = "read, get, subscribe, complete"
  expires = "2026-12-31T23:59:59Z"
  step "s" {
    tool = "t"
  }
  resource "doc" {
    uri       = "demo://doc"
    max_reads = 2
  }
  resource "items" {
    uri_template = "demo://item/{id}"
    max_reads    = 1
  }
  prompt "summarize" {
    arg "topic" { max_length = 5 }
    max_calls = 1
  }
}`

// TestDecideOpMatrix: every op in the contract's order (expired → not in
// plan → arguments → count), with the (kind, name) counter each counted op
// takes, and the ops that are not counted.
func TestDecideOpMatrix(t *testing.T) {
	p, diags := hclplan.Parse("ops.hcl", []byte(opsPlan))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	g := New(p)
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	late := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	// Indexes: step s 0, resource doc 1, items 2, prompt summarize 3.
	used := prog{calls: map[int]int{1: 2, 3: 1}}
	fresh := prog{}
	for _, tt := range []struct {
		name     string
		in       OpInput
		rule     Rule   // "" allowed
		reason   string // refused: the exact line
		counter  string // allowed or max_calls: Step() of the counter, "" none
		index    int
		resource string
		prompt   string
	}{
		{"read allowed", OpInput{Now: now, Op: OpRead, Name: "demo://doc", Progress: fresh}, "", "", "resource:doc", 1, "doc", ""},
		{"read through a template", OpInput{Now: now, Op: OpRead, Name: "demo://item/7", Progress: fresh}, "", "", "resource:items", 2, "items", ""},
		{"read expired", OpInput{Now: late, Op: OpRead, Name: "demo://doc", Progress: fresh}, RuleExpired, `plan "ops" expired at 2026-12-31T23:59:59Z; no call is allowed`, "", 0, "", ""},
		{"read unplanned", OpInput{Now: now, Op: OpRead, Name: "demo://secret", Progress: fresh}, RuleUnplanned, `resource "demo://secret" is not in plan "ops"`, "", 0, "", ""},
		{"read used up", OpInput{Now: now, Op: OpRead, Name: "demo://doc", Progress: used}, RuleMaxCalls, `resource:doc: max_reads 2 used up (2 forwarded)`, "resource:doc", 1, "doc", ""},
		{"read of another resource is counted apart", OpInput{Now: now, Op: OpRead, Name: "demo://item/1", Progress: used}, "", "", "resource:items", 2, "items", ""},
		{"get allowed", OpInput{Now: now, Op: OpGet, Name: "summarize", Args: map[string]any{"topic": "tax"}, Progress: fresh}, "", "", "prompt:summarize", 3, "", "summarize"},
		{"get without arguments", OpInput{Now: now, Op: OpGet, Name: "summarize", Progress: fresh}, RuleArgs, "", "", 0, "", ""},
		{"get over an argument's bound", OpInput{Now: now, Op: OpGet, Name: "summarize", Args: map[string]any{"topic": "taxes!"}, Progress: fresh}, RuleArgs, "", "", 0, "", ""},
		{"get of an undeclared argument", OpInput{Now: now, Op: OpGet, Name: "summarize", Args: map[string]any{"topic": "tax", "x": "y"}, Progress: fresh}, RuleArgs, "", "", 0, "", ""},
		{"get unplanned", OpInput{Now: now, Op: OpGet, Name: "other", Progress: fresh}, RuleUnplanned, `prompt "other" is not in plan "ops"`, "", 0, "", ""},
		{"get expired", OpInput{Now: late, Op: OpGet, Name: "summarize", Args: map[string]any{"topic": "tax"}, Progress: fresh}, RuleExpired, `plan "ops" expired at 2026-12-31T23:59:59Z; no call is allowed`, "", 0, "", ""},
		{"get used up", OpInput{Now: now, Op: OpGet, Name: "summarize", Args: map[string]any{"topic": "tax"}, Progress: used}, RuleMaxCalls, `prompt:summarize: max_calls 1 used up (1 forwarded)`, "prompt:summarize", 3, "", "summarize"},
		{"subscribe allowed, not counted", OpInput{Now: now, Op: OpSubscribe, Name: "demo://doc", Progress: used}, "", "", "", 0, "doc", ""},
		{"subscribe unplanned", OpInput{Now: now, Op: OpSubscribe, Name: "demo://secret", Progress: fresh}, RuleUnplanned, `resource "demo://secret" is not in plan "ops", so it cannot be subscribed to`, "", 0, "", ""},
		{"subscribe expired", OpInput{Now: late, Op: OpSubscribe, Name: "demo://doc", Progress: fresh}, RuleExpired, `plan "ops" expired at 2026-12-31T23:59:59Z; no call is allowed`, "", 0, "", ""},
		{"complete a prompt", OpInput{Now: now, Op: OpCompletePrompt, Name: "summarize", Progress: used}, "", "", "", 0, "", "summarize"},
		{"complete an unplanned prompt", OpInput{Now: now, Op: OpCompletePrompt, Name: "other", Progress: fresh}, RuleUnplanned, `completion for prompt "other": the prompt is not in plan "ops"`, "", 0, "", ""},
		{"complete a template", OpInput{Now: now, Op: OpCompleteResource, Name: "demo://item/{id}", Progress: fresh}, "", "", "", 0, "items", ""},
		{"complete an allowed URI", OpInput{Now: now, Op: OpCompleteResource, Name: "demo://doc", Progress: fresh}, "", "", "", 0, "doc", ""},
		{"complete an unplanned template", OpInput{Now: now, Op: OpCompleteResource, Name: "demo://other/{id}", Progress: fresh}, RuleUnplanned, `completion for resource "demo://other/{id}": no resource block of plan "ops" names it`, "", 0, "", ""},
		{"complete expired", OpInput{Now: late, Op: OpCompletePrompt, Name: "summarize", Progress: fresh}, RuleExpired, `plan "ops" expired at 2026-12-31T23:59:59Z; no call is allowed`, "", 0, "", ""},
		{"an op the plan does not know", OpInput{Now: now, Op: "tasks/get", Name: "x", Progress: fresh}, RuleUnplanned, `tasks/get is not a request plan "ops" governs`, "", 0, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := g.DecideOp(tt.in)
			if d.Allowed != (tt.rule == "") || d.Rule != tt.rule {
				t.Fatalf("allowed %v rule %q (%s), want rule %q", d.Allowed, d.Rule, d.Reason, tt.rule)
			}
			if tt.reason != "" && d.Reason != tt.reason {
				t.Errorf("reason %q, want %q", d.Reason, tt.reason)
			}
			if !d.Allowed && d.Reason == "" {
				t.Error("refused without a reason")
			}
			got := ""
			if d.Count != nil {
				got = d.Count.Step()
				if d.Count.Index != tt.index {
					t.Errorf("counter index %d, want %d", d.Count.Index, tt.index)
				}
			}
			if got != tt.counter {
				t.Errorf("counter %q, want %q", got, tt.counter)
			}
			if d.Allowed {
				if (d.Resource == nil) != (tt.resource == "") || d.Resource != nil && d.Resource.Name != tt.resource {
					t.Errorf("resource block %+v, want %q", d.Resource, tt.resource)
				}
				if (d.Prompt == nil) != (tt.prompt == "") || d.Prompt != nil && d.Prompt.Name != tt.prompt {
					t.Errorf("prompt block %+v, want %q", d.Prompt, tt.prompt)
				}
			}
		})
	}
}

// TestReopen: a retry's sealed counter is found again only where the
// loaded plan keeps the same block under the same index, allowing the same
// URI or prompt.
func TestReopen(t *testing.T) {
	p, diags := hclplan.Parse("ops.hcl", []byte(opsPlan))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	g := New(p)
	for _, tt := range []struct {
		op    Op
		index int
		step  string
		name  string
		ok    bool
	}{
		{OpRead, 1, "resource:doc", "demo://doc", true},
		{OpRead, 1, "resource:doc", "demo://item/1", false},
		{OpRead, 2, "resource:items", "demo://item/1", true},
		{OpRead, 2, "resource:doc", "demo://doc", false},
		{OpRead, 0, "s", "demo://doc", false},
		{OpRead, 3, "prompt:summarize", "summarize", false},
		{OpGet, 3, "prompt:summarize", "summarize", true},
		{OpGet, 3, "prompt:summarize", "other", false},
		{OpGet, 1, "resource:doc", "demo://doc", false},
		{OpGet, 4, "prompt:summarize", "summarize", false},
		{OpSubscribe, 1, "resource:doc", "demo://doc", false},
	} {
		d, ok := g.Reopen(tt.op, tt.index, tt.step, tt.name)
		if ok != tt.ok || ok && (d.Count == nil || d.Count.Index != tt.index || d.Count.Step() != tt.step) {
			t.Errorf("Reopen(%s, %d, %s, %s) = %+v %v, want %v", tt.op, tt.index, tt.step, tt.name, d, ok, tt.ok)
		}
	}
}
