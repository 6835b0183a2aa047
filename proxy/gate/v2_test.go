package gate

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/planlock/planlock/hclplan"
)

// The gate enforces the v2 constraints of a plan: nested arguments and CEL
// checks block with a reason that names the path or quotes the message.
func TestCheckNestedAndCEL(t *testing.T) {
	src, err := os.ReadFile("../../examples/filesystem/edit-docs.hcl")
	if err != nil {
		t.Fatal(err)
	}
	p, diags := hclplan.Parse("edit-docs.hcl", src)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	g := New(p)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name, tool, args string
		want             string // "" = allowed; else a substring of the reason
	}{
		{"read ok", "read_multiple_files", `{"paths": ["/srv/docs/a.md"]}`, ""},
		{"read climbs out", "read_multiple_files", `{"paths": ["/srv/docs/a.md", "/srv/docs/x/../../etc"]}`, `argument "paths"[1] = "/srv/docs/x/../../etc" does not match`},
		{"edit ok", "edit_file", `{"path": "/srv/docs/a.md", "edits": [{"oldText": "teh", "newText": "the"}]}`, ""},
		{"edit too long", "edit_file", `{"path": "/srv/docs/a.md", "edits": [{"oldText": "a", "newText": "b"}, {"oldText": "` + strings.Repeat("x", 1001) + `", "newText": "y"}]}`, `step "edit": argument "edits"[1].oldText has 1001 characters, more than the maximum length 1000`},
		{"edit smuggles a key", "edit_file", `{"path": "/srv/docs/a.md", "edits": [{"oldText": "a", "newText": "b", "path": "/etc/passwd"}]}`, `argument "edits"[0].path is not allowed by the plan`},
		{"edit check", "edit_file", `{"path": "/srv/docs/a.md", "edits": [{"oldText": "a", "newText": "a"}]}`, `step "edit": check failed: every edit must change something`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, f := g.Check(now, tt.tool, args(t, tt.args), prog{})
			switch {
			case tt.want == "" && f != nil:
				t.Fatalf("blocked: %s", f.Reason)
			case tt.want != "" && (f == nil || f.Rule != RuleArgs || !strings.Contains(f.Reason, tt.want)):
				t.Fatalf("got %+v, want args failure %q", f, tt.want)
			}
		})
	}
}
