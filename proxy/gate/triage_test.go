package gate

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/planlock/planlock/hclplan"
)

// The GitHub triage example allows labels from a fixed set only: the gate
// lets a subset of the set through and blocks any other label, an empty or
// over-long list, a repeated label and a non-string element.
func TestTriageLabelsFromAFixedSet(t *testing.T) {
	src, err := os.ReadFile("../../examples/github-triage/labels.hcl")
	if err != nil {
		t.Fatal(err)
	}
	p, diags := hclplan.Parse("labels.hcl", src)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	g := New(p)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const base = `"owner": "acme", "repo": "app", "issue_number": 7, `
	tests := []struct {
		name, args string
		want       string // "" = allowed; else a substring of the reason
	}{
		{"one label", `{` + base + `"labels": ["bug"]}`, ""},
		{"three labels of the set", `{` + base + `"labels": ["bug", "docs", "needs-repro"]}`, ""},
		{"a label outside the set", `{` + base + `"labels": ["bug", "wontfix"]}`, `argument "labels"[1] = "wontfix"`},
		{"no label", `{` + base + `"labels": []}`, `"labels"`},
		{"four labels", `{` + base + `"labels": ["bug", "docs", "question", "needs-repro"]}`, `"labels"`},
		{"a repeated label", `{` + base + `"labels": ["bug", "bug"]}`, `each label at most once`},
		{"a number as a label", `{` + base + `"labels": [1]}`, `argument "labels"[0]`},
		{"another repository", `{"owner": "acme", "repo": "secret", "issue_number": 7, "labels": ["bug"]}`, `argument "repo"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, f := g.Check(now, "update_issue", args(t, tt.args), prog{})
			switch {
			case tt.want == "" && f != nil:
				t.Fatalf("blocked: %s", f.Reason)
			case tt.want != "" && (f == nil || f.Rule != RuleArgs || !strings.Contains(f.Reason, tt.want)):
				t.Fatalf("got %+v, want args failure %q", f, tt.want)
			}
		})
	}
}
