package catalog

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/planlock/planlock/hclplan"
)

func raws(t *testing.T, src string) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	if err := json.Unmarshal([]byte(src), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// The skeleton offers the upstream's resources, templates and prompts as
// commented blocks that parse once uncommented (with one step for the tools).
func TestSkeletonWithResourcesAndPrompts(t *testing.T) {
	ex := DecodeExtras(
		raws(t, `[{"uri":"demo://doc/a.md","name":"a.md","description":"Doc A"},{"uri":"demo://doc/b.md","name":"a.md"},{"name":"no uri"}]`),
		raws(t, `[{"uriTemplate":"demo://text/{id}","name":"Dynamic Text"}]`),
		raws(t, `[{"name":"args-prompt","arguments":[{"name":"city","required":true},{"name":"state"}]},{"name":"simple"}]`))
	tools := []Tool{{Name: "echo"}}
	src := SkeletonWith("demo", tools, ex, []string{"node", "s.js"}, "", time.Time{})
	for _, want := range []string{`# resource "a.md" {`, `# resource "a.md-2" {`, `uri_template = "demo://text/{id}"`, `# prompt "args-prompt" {`, `arg "city" { max_length = 100 }`} {
		if !strings.Contains(string(src), want) {
			t.Fatalf("skeleton lacks %q:\n%s", want, src)
		}
	}
	uncommented := regexp.MustCompile(`(?m)^  # ((step|resource|prompt) |  |\})`).ReplaceAll(src, []byte("  $1"))
	plan, diags := hclplan.Parse("plan.hcl", uncommented)
	if diags.HasErrors() {
		t.Fatalf("uncommented skeleton: %v\n%s", diags, uncommented)
	}
	if len(plan.Resources) != 3 || len(plan.Prompts) != 2 {
		t.Fatalf("%d resources, %d prompts, want 3 and 2", len(plan.Resources), len(plan.Prompts))
	}
	if err := plan.Prompt("args-prompt").Check(map[string]any{"city": "Paris"}); err != nil {
		t.Fatalf("the suggested prompt constraints refuse a plain call: %v", err)
	}
	// Without extras the skeleton is Skeleton's.
	if string(SkeletonWith("demo", tools, Extras{}, []string{"x"}, "", time.Time{})) != string(Skeleton("demo", tools, []string{"x"}, "", time.Time{})) {
		t.Fatal("SkeletonWith without extras differs from Skeleton")
	}
}
