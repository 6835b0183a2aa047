package catalog

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/planlock/planlock/hclplan"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// The testdata tools lists are real tools/list results (planlock tools --json)
// of the refund example, server-everything and server-filesystem.
func loadTools(t *testing.T, name string) []Tool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".tools.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r struct{ Tools []json.RawMessage }
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	tools, err := Decode(r.Tools)
	if err != nil {
		t.Fatal(err)
	}
	return tools
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s differs from the golden file (go test -update to accept):\n%s", name, got)
	}
}

var servers = []string{"refund", "everything", "filesystem"}

func TestList(t *testing.T) {
	for _, s := range servers {
		t.Run(s, func(t *testing.T) { golden(t, s+".list.golden", []byte(List(loadTools(t, s)))) })
	}
}

var commented = regexp.MustCompile(`(?m)^  # (step |  |\})`)

// uncomment turns every commented step of a skeleton into a step.
func uncomment(src []byte) []byte { return commented.ReplaceAll(src, []byte("  $1")) }

func TestSkeletonParsesOnceUncommented(t *testing.T) {
	now := time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)
	for _, s := range servers {
		t.Run(s, func(t *testing.T) {
			tools := loadTools(t, s)
			src := Skeleton("demo-"+s, tools, []string{"node", "server.js", "${HOME}"}, "", now.Add(7*24*time.Hour))
			golden(t, s+".skeleton.golden", src)
			// As written it has no step: invalid, which tells the user to choose.
			if _, diags := hclplan.Parse("plan.hcl", src); !diags.HasErrors() || !strings.Contains(diags.Error(), "Plan has no steps") {
				t.Fatalf("the commented skeleton should lack steps: %v", diags)
			}
			plan, diags := hclplan.Parse("plan.hcl", uncomment(src))
			if diags.HasErrors() {
				t.Fatalf("uncommented skeleton does not parse: %v\n%s", diags, uncomment(src))
			}
			if len(plan.Steps) != len(tools) {
				t.Fatalf("%d steps, want one per tool (%d)", len(plan.Steps), len(tools))
			}
			if got := plan.Upstream.Command; strings.Join(got, " ") != "node server.js ${HOME}" {
				t.Fatalf("upstream command %q", got)
			}
		})
	}
}

// An expiry is written only when asked for, and either way the skeleton is
// in canonical format.
func TestSkeletonExpires(t *testing.T) {
	tools := loadTools(t, "refund")
	tests := []struct {
		name    string
		expires time.Time
		want    string
	}{
		{"none", time.Time{}, ""},
		{"asked", time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC), `expires = "2027-01-02T03:04:05Z"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := uncomment(Skeleton("demo", tools, []string{"node", "server.js"}, "", tt.expires))
			if tt.want == "" && strings.Contains(string(src), "expires") {
				t.Fatalf("expires written though not asked for:\n%s", src)
			}
			if tt.want != "" && !strings.Contains(string(src), tt.want) {
				t.Fatalf("want %s in:\n%s", tt.want, src)
			}
			formatted, diags := hclplan.Format("plan.hcl", src)
			if diags.HasErrors() || string(formatted) != string(src) {
				t.Fatalf("skeleton not in canonical format (%v):\n%s", diags, src)
			}
			plan, diags := hclplan.Parse("plan.hcl", src)
			if diags.HasErrors() || !plan.Expires.Equal(tt.expires) {
				t.Fatalf("parsed expires %v (%v), want %v", plan.Expires, diags, tt.expires)
			}
		})
	}
}

func TestMCPConfig(t *testing.T) {
	out, err := MCPConfig("refund", "/usr/local/bin/planlock", "/plans/refund.hcl", []string{"--state", "/var/lib/planlock"}, []string{"node", "server.js"})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "mcp-config.golden", out)
}

// plan init writes the pins of the definitions it saw: an uncommented
// skeleton's pins all match those definitions (plan validate --tools), and
// a changed definition fails the check.
func TestSkeletonPinsMatchTheTools(t *testing.T) {
	for _, s := range servers {
		t.Run(s, func(t *testing.T) {
			tools := loadTools(t, s)
			plan, diags := hclplan.Parse("plan.hcl", uncomment(Skeleton("demo", tools, []string{"node"}, "", time.Time{})))
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			for _, st := range plan.Steps {
				if st.ToolPin == nil || st.ToolPin.Description == nil {
					t.Fatalf("step %s has no tool_pin with a description", st.Name)
				}
			}
			for _, d := range hclplan.CheckTools(plan, tools) {
				if strings.Contains(d.Summary, "Tool definition") || strings.Contains(d.Summary, "description") {
					t.Errorf("pin check: %s: %s", d.Summary, d.Detail)
				}
			}
			changed := append([]Tool(nil), tools...)
			changed[0].Raw = []byte(strings.Replace(string(changed[0].Raw), `"name"`, `"x-changed":"new","name"`, 1))
			if diags := hclplan.CheckTools(plan, changed); !strings.Contains(diags.Error(), "Tool definition changed") {
				t.Fatalf("a changed definition passes the pin check: %v", diags)
			}
		})
	}
}

func TestHCLTextRoundTrips(t *testing.T) {
	for _, s := range []string{
		"plain", "quote \" and \\ backslash", "line\nbreak\r\ttab", "${var} and %{if} and $ {", "$${x}",
		"bell\a back\b feed\f vt\v nul\x00", "zero\u200bwidth bidi\u202e", "emoji 🙂 and \U000e0001 tag", "é ß 中",
	} {
		src := "plan \"p\" {\n  goal = " + HCLText(s) + "\n  step \"s\" { tool = \"t\" }\n}\n"
		p, diags := hclplan.Parse("p.hcl", []byte(src))
		if diags.HasErrors() {
			t.Errorf("HCLText(%q) = %s does not parse: %v", s, HCLText(s), diags)
			continue
		}
		if p.Goal != s {
			t.Errorf("HCLText(%q) = %s reads back as %q", s, HCLText(s), p.Goal)
		}
	}
}
