package proxy

import (
	"os"
	"strings"
	"testing"

	"github.com/planlock/planlock/hclplan"
)

// The limits line of tools/list tells the agent the nested constraints and
// the CEL checks too.
func TestLimitsLineNestedAndChecks(t *testing.T) {
	src, err := os.ReadFile("../examples/filesystem/edit-docs.hcl")
	if err != nil {
		t.Fatal(err)
	}
	p, diags := hclplan.Parse("edit-docs.hcl", src)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	got := limitsLine(p, "edit_file")
	for _, want := range []string{
		"edits items >= 1, items <= 5, each item object {oldText length <= 1000; newText length <= 1000} with no other fields",
		"; check: args.edits.all(e, e.oldText != e.newText) (every edit must change something)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("limits line %q lacks %q", got, want)
		}
	}
}
