package hclplan

import (
	"os"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

func everythingPlan(t *testing.T) *Plan {
	t.Helper()
	src, err := os.ReadFile("../examples/everything/everything.hcl")
	if err != nil {
		t.Fatal(err)
	}
	p, diags := Parse("everything.hcl", src)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return p
}

func TestResourceMatches(t *testing.T) {
	p := everythingPlan(t)
	tests := []struct{ uri, want string }{
		{"demo://resource/static/document/architecture.md", "architecture"},
		{"demo://resource/static/document/features.md", "documents"},
		{"demo://resource/static/document/../secret.md", ""},
		{"demo://resource/static/document/architecture.md?x", ""},
		{"demo://resource/dynamic/text/42", "dynamic"},
		{"demo://resource/dynamic/text/42/more", ""},
		{"demo://resource/dynamic/blob/42", ""},
		{"file:///etc/passwd", ""},
	}
	for _, tt := range tests {
		got := ""
		if r := p.Resource(tt.uri); r != nil {
			got = r.Name
		}
		if got != tt.want {
			t.Errorf("Resource(%q) = %q, want %q", tt.uri, got, tt.want)
		}
	}
	if p.Resources[0].MaxReads != 5 || len(p.Steps) != 0 {
		t.Fatalf("parsed %+v", p.Resources[0])
	}
}

func TestPromptCheck(t *testing.T) {
	p := everythingPlan(t)
	if p.Prompt("nope") != nil {
		t.Fatal("a prompt the plan does not name is allowed")
	}
	tests := []struct{ prompt, args, want string }{
		{"args-prompt", `{"city": "Paris"}`, ""},
		{"args-prompt", `{"city": "Paris", "state": "Île-de-France"}`, ""},
		{"args-prompt", `{"city": "Rome"}`, `prompt "args-prompt": argument "city" = "Rome", want one of ["Paris", "Berlin"]`},
		{"args-prompt", `{"city": "Paris", "x": "1"}`, `prompt "args-prompt": argument "x" is not allowed by the plan`},
		{"simple-prompt", `{}`, ""},
		{"simple-prompt", `{"a": "b"}`, `prompt "simple-prompt": argument "a" is not allowed by the plan`},
	}
	for _, tt := range tests {
		err := p.Prompt(tt.prompt).Check(decode(t, tt.args))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("%s %s: got %q, want %q", tt.prompt, tt.args, got, tt.want)
		}
	}
}

func TestParseResourceDiagnostics(t *testing.T) {
	tests := []struct {
		name, body string
		want       []string
	}{
		{"none of uri, pattern, template", "  resource \"r\" {\n    max_reads = 2\n  }", []string{"3:3 Resource needs one of uri, uri_pattern, uri_template"}},
		{"two of them", "  resource \"r\" {\n    uri         = \"a://b\"\n    uri_pattern = \"a://.*\"\n  }", []string{"3:3 Resource needs one of uri, uri_pattern, uri_template"}},
		{"bad pattern", "  resource \"r\" { uri_pattern = \"(\" }", []string{"3:32 Invalid uri_pattern"}},
		{"bad template", "  resource \"r\" { uri_template = \"a://{x\" }", []string{"3:33 Invalid uri_template"}},
		{"max_reads zero", "  resource \"r\" {\n    uri       = \"a://b\"\n    max_reads = 0\n  }", []string{"5:17 Invalid max_reads"}},
		{"duplicate resource", "  resource \"r\" { uri = \"a://b\" }\n  resource \"r\" { uri = \"a://c\" }", []string{"4:12 Duplicate resource name"}},
		{"bad resource name", "  resource \"../r\" { uri = \"a://b\" }", []string{"3:12 Invalid resource name"}},
		{"duplicate prompt", "  prompt \"p\" {}\n  prompt \"p\" {}", []string{"4:10 Duplicate prompt"}},
		{"prompt max_calls zero", "  prompt \"p\" { max_calls = 0 }", []string{"3:28 Invalid max_calls"}},
		{"prompt arg without constraint", "  prompt \"p\" {\n    arg \"a\" {}\n  }", []string{"4:5 Argument has no constraint"}},
		{"unknown attribute", "  prompt \"p\" { uri = \"x\" }", []string{"3:16 Unsupported argument"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, diags := Parse("test.hcl", []byte(plan(tt.body)))
			if p != nil {
				t.Fatal("Parse returned a plan for an invalid file")
			}
			var got []string
			for _, d := range diags {
				if d.Severity == hcl.DiagError {
					got = append(got, formatPos(d))
				}
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("diagnostics:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// A resource's input block is parsed as a step's, and the summary and the
// JSON form show it under the resource.
func TestResourceInput(t *testing.T) {
	src := `plan "p" {
  goal = "g"
  resource "r" {
    uri = "test://r"
    input {
      sampling { max_tokens = 10 }
    }
  }
}`
	p, diags := Parse("p.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	in := p.Resources[0].Input
	if in == nil || in.Sampling == nil || in.Sampling.MaxTokens != 10 || in.MaxRounds != 1 {
		t.Fatalf("input %+v", in)
	}
	sum := Summary(p)
	if !strings.Contains(sum, "test://r") || !strings.Contains(sum, "  - Sampling (an LLM completion the upstream asks the client for), at most 10 tokens") {
		t.Errorf("summary does not show the resource's input:\n%s", sum)
	}
	b, err := JSON(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"max_reads": 1,
      "input": {
        "max_rounds": 1,
        "sampling": {
          "max_tokens": 10,`) {
		t.Errorf("JSON does not carry the resource's input:\n%s", b)
	}
	bad := strings.Replace(src, "sampling { max_tokens = 10 }", "", 1)
	if _, diags := Parse("p.hcl", []byte(bad)); !diags.HasErrors() {
		t.Error("an empty input block under a resource was accepted")
	}
}
