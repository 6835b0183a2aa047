package plandiff

import (
	"strconv"
	"strings"
	"testing"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/hclplan/toolpin"
)

// pinnedPlan is a plan whose one step pins def, recording it.
func pinnedPlan(t *testing.T, def string) *hclplan.Plan {
	t.Helper()
	d, err := toolpin.Digest([]byte(def))
	if err != nil {
		t.Fatal(err)
	}
	src := `plan "p" {
  goal = "g"
  step "s" {
    tool = "refund"
    arg "order_id" { any = true }
    tool_pin {
      digest     = "` + d + `"
      definition = ` + strconv.Quote(def) + `
    }
  }
}
`
	p, diags := hclplan.Parse("p.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return p
}

// A changed pin whose definitions are recorded shows what changed in them,
// as reviewable changes, besides the digests.
func TestPowerDiffToolDefinition(t *testing.T) {
	old := `{"name":"refund","description":"Refund.","inputSchema":{"type":"object","properties":{"order_id":{"type":"string"},"amount":{"type":"number"}},"required":["order_id","amount"]},"annotations":{"destructiveHint":true}}`
	for _, tc := range []struct{ name, new, want string }{
		{"added optional property", strings.Replace(old, `"properties":{`, `"properties":{"cc":{"type":"string"},`, 1), "pinned input property `cc` (`string`) added"},
		{"removed property", strings.Replace(old, `,"amount":{"type":"number"}`, ``, 1), "pinned input property `amount` removed"},
		{"type changed", strings.Replace(old, `"amount":{"type":"number"}`, `"amount":{"type":"string"}`, 1), "pinned input property `amount` type `number` → `string`"},
		{"now optional", strings.Replace(old, `"required":["order_id","amount"]`, `"required":["order_id"]`, 1), "pinned input property `amount` is now optional"},
		{"output schema", strings.Replace(old, `"annotations"`, `"outputSchema":{"type":"object"},"annotations"`, 1), "pinned definition now has an output schema"},
		{"annotation", strings.Replace(old, `"destructiveHint":true`, `"destructiveHint":false`, 1), "pinned annotation `destructiveHint` `true` → `false`"},
		{"UI resource", strings.Replace(old, `"annotations"`, `"_meta":{"ui":{"resourceUri":"ui://r"}},"annotations"`, 1), "pinned `_meta` `ui` = `{\"resourceUri\":\"ui://r\"}` added"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var texts []string
			for _, c := range Diff(pinnedPlan(t, old), pinnedPlan(t, tc.new)) {
				if c.Power != Changed {
					t.Errorf("%q is not a change to review", c.Text)
				}
				texts = append(texts, c.Text)
			}
			all := strings.Join(texts, "\n")
			if !strings.Contains(all, "pinned tool definition `sha256:") || !strings.Contains(all, ": "+tc.want) {
				t.Fatalf("diff lacks %q:\n%s", tc.want, all)
			}
		})
	}
}
