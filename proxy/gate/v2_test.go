package gate

import (
	"os"
	"runtime"
	"strings"
	"sync"
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

// Agent-sized input never reaches CEL: three 15 MiB calls in parallel
// against a natural split check are refused on their size, before the
// expression runs, allocating a small fraction of one message between them.
func TestCheckCELInputBoundedBeforeEval(t *testing.T) {
	p, diags := hclplan.Parse("fetch.hcl", []byte(`plan "fetch" {
  goal = "read pages"
  step "get" {
    tool = "fetch"
    arg "path" { pattern = "/.*" }
    arg "tags" { any = true }
    check {
      expr    = "args.path.split('/').size() <= 64 && args.tags.all(t, t.size() < 20)"
      message = "at most 64 segments and short tags"
    }
  }
}
`))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	g := New(p)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	huge := strings.Repeat("/", 15<<20)
	many := make([]any, 1<<20)
	for i := range many {
		many[i] = "t"
	}
	calls := []struct {
		name string
		args map[string]any
		want string
	}{
		{"huge path", map[string]any{"path": huge, "tags": []any{}}, `argument "path" has 15728640 characters, more than the 10000 an expression may read`},
		{"many tags", map[string]any{"path": "/a", "tags": many}, `argument "tags" has 1048576 items, more than the 1000 an expression may read`},
		{"huge tag", map[string]any{"path": "/a", "tags": []any{"x", huge}}, `argument "tags"[1] has 15728640 characters`},
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	fails := make([]*Failure, len(calls))
	for i, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, fails[i] = g.Check(now, "fetch", c.args, prog{})
		}()
	}
	wg.Wait()
	runtime.ReadMemStats(&after)
	for i, c := range calls {
		if f := fails[i]; f == nil || f.Rule != RuleArgs || !strings.Contains(f.Reason, c.want) {
			t.Errorf("%s: got %+v, want args failure %q", c.name, f, c.want)
		}
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 2<<20 {
		t.Fatalf("three refused calls allocated %d bytes, want under 2 MiB", alloc)
	}
	if _, f := g.Check(now, "fetch", map[string]any{"path": "/a/b", "tags": []any{"x"}}, prog{}); f != nil {
		t.Fatalf("small call blocked: %s", f.Reason)
	}
}
