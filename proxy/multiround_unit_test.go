package proxy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/wire"
)

// TestRelayResultRefusesUnrelayedTypes: every spelling encoding/json (and
// so mcp-go's parser) reads as a resultType other than complete is refused;
// a complete result is relayed without the multi-round fields.
func TestRelayResultRefusesUnrelayedTypes(t *testing.T) {
	const content = `"content":[{"type":"text","text":"x"}]`
	for _, tt := range []struct {
		name, res string
		refused   string // "" when relayed
	}{
		{"input_required", `{"resultType":"input_required","inputRequests":{"a":{"method":"roots/list"}}}`, "input_required"},
		{"task", `{"resultType":"task","task":{"taskId":"t"}}`, "task"},
		{"key in other case", `{"ResultType":"input_required",` + content + `}`, "input_required"},
		{"escaped key", `{"result\u0054ype":"task",` + content + `}`, "task"},
		{"value in other case", `{"resultType":"INPUT_REQUIRED",` + content + `}`, "INPUT_REQUIRED"},
		{"escaped value", `{"resultType":"input\u005frequired",` + content + `}`, "input_required"},
		{"object", `{"resultType":{},` + content + `}`, "{}"},
		{"array", `{"resultType":["complete"],` + content + `}`, `["complete"]`},
		{"false", `{"resultType":false,` + content + `}`, "false"},
		{"complete", `{"resultType":"complete",` + content + `,"inputRequests":{"a":{"method":"roots/list"}},"requestState":"s"}`, ""},
		{"empty", `{"resultType":"",` + content + `}`, ""},
		{"null", `{"resultType":null,` + content + `}`, ""},
		{"absent with state", `{` + content + `,"requestState":"s"}`, ""},
		{"plain", `{` + content + `}`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := wire.RelayResult(json.RawMessage(tt.res))
			var un *wire.UnrelayedResult
			if tt.refused != "" {
				if !errors.As(err, &un) || un.ResultType != tt.refused {
					t.Fatalf("wire.RelayResult = %+v, %v; want refused as %q", r, err, tt.refused)
				}
				if strings.Contains(un.Error(), "\n") {
					t.Errorf("the reason is not one line: %q", un.Error())
				}
				return
			}
			if err != nil {
				t.Fatalf("relayResult: %v", err)
			}
			b, err := wire.AppendToolResult(nil, r)
			if err != nil {
				t.Fatal(err)
			}
			if s := string(b); strings.Contains(s, "inputRequests") || strings.Contains(s, "requestState") || strings.Contains(s, "resultType") || !strings.Contains(s, `"text":"x"`) {
				t.Errorf("relayed %s", s)
			}
		})
	}
}

// TestStateWithoutInputRecorderRefusesInputRules: a state that cannot
// record the answers of multi-round calls is refused at start (and for a
// new plan) when the plan has input rules, with the reason, instead of
// losing the feature at the first retry.
func TestStateWithoutInputRecorderRefusesInputRules(t *testing.T) {
	plan := testPlanFrom(t, inputResourcePlan)
	cfg := Config{Plan: plan, State: noState{}, Upstream: UpstreamConfig{Command: []string{"true"}}}
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "does not record their answers") {
		t.Fatalf("New: %v, want the missing capability", err)
	}
	plain := testPlanFrom(t, `plan "p" {
  goal = "g"
  step "s" { tool = "t" }
}`)
	cfg.Plan = plain
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New without input rules: %v", err)
	}
	if err := p.SetPlan(plan); err == nil || !strings.Contains(err.Error(), "does not record their answers") {
		t.Fatalf("SetPlan: %v, want the missing capability", err)
	}
	if p.Plan() != plain {
		t.Fatal("the refused plan was loaded")
	}
}

func testPlanFrom(t *testing.T, src string) *hclplan.Plan {
	t.Helper()
	plan, diags := hclplan.Parse("plan.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return plan
}
