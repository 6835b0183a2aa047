package hclplan

import (
	"os"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

const editsArg = `arg "edits" {
  max_items = 3
  items {
    field "oldText" { max_length = 10 }
    field "newText" {
      max_length = 10
      optional   = true
    }
  }
}`

func TestCheckNested(t *testing.T) {
	tests := []struct {
		name, body, args, want string // want "" = allowed, else the whole message
	}{
		{"edits ok", editsArg, `{"edits": [{"oldText": "a", "newText": "b"}, {"oldText": "c"}]}`, ""},
		{"edits empty list ok", editsArg, `{"edits": []}`, ""},
		{"element too long names the path", editsArg, `{"edits": [{"oldText": "a"}, {"oldText": "b"}, {"oldText": "01234567890"}]}`,
			`step "s": argument "edits"[2].oldText has 11 characters, more than the maximum length 10`},
		{"missing required field", editsArg, `{"edits": [{"newText": "b"}]}`, `step "s": argument "edits"[0].oldText is required`},
		{"undeclared field rejected", editsArg, `{"edits": [{"oldText": "a", "zz": 1, "extra key": 2}]}`, `step "s": argument "edits"[0]["extra key"] is not allowed by the plan`},
		{"too many items", editsArg, `{"edits": [{"oldText": "a"}, {"oldText": "a"}, {"oldText": "a"}, {"oldText": "a"}]}`, `step "s": argument "edits" has 4 items, more than the maximum 3`},
		{"not an array", editsArg, `{"edits": {"oldText": "a"}}`, `step "s": argument "edits" = {"oldText":"a"}, want an array`},
		{"element not an object", editsArg, `{"edits": ["a"]}`, `step "s": argument "edits"[0] = "a", want an object`},
		{"min_items", `arg "l" {
  min_items = 2
  items { enum = ["bug", "docs"] }
}`, `{"l": ["bug"]}`, `step "s": argument "l" has 1 items, fewer than the minimum 2`},
		{"items enum", `arg "l" {
  items { enum = ["bug", "docs"] }
}`, `{"l": ["bug", "wontfix"]}`, `step "s": argument "l"[1] = "wontfix", want one of ["bug", "docs"]`},
		{"items eq min max pattern any", `arg "l" {
  items {
    field "n" {
      min = 1
      max = 5
    }
    field "s" { pattern = "[a-z]+" }
    field "e" {
      eq       = 3
      optional = true
    }
    field "x" {
      any      = true
      optional = true
    }
  }
}`, `{"l": [{"n": 5, "s": "abc", "x": {"deep": [1]}}, {"n": 6, "s": "a"}]}`, `step "s": argument "l"[1].n = 6 is above the maximum 5`},
		{"nested items of items", `arg "m" {
  items {
    max_items = 2
    items { max_length = 1 }
  }
}`, `{"m": [["a"], ["b", "cc"]]}`, `step "s": argument "m"[1][1] has 2 characters, more than the maximum length 1`},
		{"field on arg", `arg "o" {
  field "a" { eq = 1 }
}`, `{"o": {"a": 1}}`, ""},
		{"field on arg, other key", `arg "o" {
  field "a" { eq = 1 }
}`, `{"o": {"a": 1, "b": 2}}`, `step "s": argument "o".b is not allowed by the plan`},
		{"any_other_fields", `arg "o" {
  any_other_fields = true
  field "a" { eq = 1 }
}`, `{"o": {"a": 1, "b": 2}}`, ""},
		{"any_other_fields still checks declared", `arg "o" {
  any_other_fields = true
  field "a" { eq = 1 }
}`, `{"o": {"a": 2, "b": 2}}`, `step "s": argument "o".a = 2, want 1`},
		{"field object needed", `arg "o" {
  field "a" { eq = 1 }
}`, `{"o": [1]}`, `step "s": argument "o" = [1], want an object`},
		{"v1 max_length on arrays kept", `arg "l" { max_length = 1 }`, `{"l": [1, 2]}`, `step "s": argument "l" has 2 items, more than the maximum length 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := stepFrom(t, tt.body)
			err := s.Check(decode(t, tt.args))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Fatalf("Check(%s)\n got: %s\nwant: %s", tt.args, got, tt.want)
			}
		})
	}
}

func TestParseNestedDiagnostics(t *testing.T) {
	step := func(args string) string {
		return plan("  step \"s\" {\n    tool = \"t\"\n" + args + "\n  }")
	}
	deep := "arg \"a\" {\n" + strings.Repeat("items {\n", maxNesting+1) + "any = true\n" + strings.Repeat("}\n", maxNesting+1) + "}"
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"min_items above max_items", step("    arg \"a\" {\n      min_items = 3\n      max_items = 1\n    }"), []string{"6:7 min_items is greater than max_items"}},
		{"negative max_items", step("    arg \"a\" { max_items = -1 }"), []string{"5:27 Invalid max_items"}},
		{"two items blocks", step("    arg \"a\" {\n      items { any = true }\n      items { any = true }\n    }"), []string{"7:7 Duplicate items block"}},
		{"duplicate field", step("    arg \"a\" {\n      field \"x\" { any = true }\n      field \"x\" { any = true }\n    }"), []string{"7:13 Duplicate field"}},
		{"empty field name", step("    arg \"a\" {\n      field \"\" { any = true }\n    }"), []string{"6:13 Empty field name"}},
		{"items and field", step("    arg \"a\" {\n      items { any = true }\n      field \"x\" { any = true }\n    }"), []string{"7:7 items and field together", "5:5 Contradictory constraints"}},
		{"items without constraint", step("    arg \"a\" {\n      items {}\n    }"), []string{"6:7 Argument has no constraint"}},
		{"field without constraint", step("    arg \"a\" {\n      field \"x\" { optional = true }\n    }"), []string{"6:7 Argument has no constraint"}},
		{"optional inside items", step("    arg \"a\" {\n      items { optional = true }\n    }"), []string{"6:15 Unsupported argument"}},
		{"any with items", step("    arg \"a\" {\n      any = true\n      items { any = true }\n    }"), []string{"6:7 any combined with other constraints"}},
		{"pattern with items", step("    arg \"a\" {\n      pattern = \"x\"\n      items { any = true }\n    }"), []string{"5:5 Contradictory constraints"}},
		{"any_other_fields alone", step("    arg \"a\" {\n      any_other_fields = true\n      max_length = 3\n    }"), []string{"6:7 any_other_fields without field blocks"}},
		{"message without expr", step("    arg \"a\" {\n      message = \"m\"\n      max_length = 3\n    }"), []string{"6:7 message without expr"}},
		{"nested too deep", step("    " + deep), []string{"38:1 Constraints nested too deep"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, diags := Parse("test.hcl", []byte(tt.src))
			if p != nil {
				t.Fatalf("Parse returned a plan for an invalid file")
			}
			var got []string
			for _, d := range diags {
				if d.Severity == hcl.DiagError {
					got = append(got, formatPos(d))
				}
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("diagnostics:\n%s\nwant:\n%s\nsource:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"), tt.src)
			}
		})
	}
}

// The v2 example of docs/plan-language.md is a valid plan body.
func TestDocsV2ExampleParses(t *testing.T) {
	doc, err := os.ReadFile("../docs/plan-language.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "## Arrays, objects and expressions (v2)")
	if !ok {
		t.Fatal("docs/plan-language.md has no v2 section")
	}
	_, rest, _ = strings.Cut(rest, "```hcl\n")
	example, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("no hcl example in the v2 section")
	}
	p, diags := Parse("doc.hcl", []byte(plan(example)))
	if diags.HasErrors() {
		t.Fatalf("the documented example does not parse: %s", diags.Error())
	}
	if len(p.Steps) != 2 || p.Steps[1].Checks == nil || p.Steps[0].Args[0].Items == nil {
		t.Fatalf("example parsed to %+v", p.Steps)
	}
}

func TestLimitsV2(t *testing.T) {
	s := stepFrom(t, editsArg+`
arg "paths" {
  items { pattern = "/srv/.+" }
  expr    = "self.size() > 0"
  message = "at least one"
}
arg "v1" { max_length = 3 }
check { expr = "args.edits.size() < 3" }`)
	got := strings.Join(s.Args[0].limitsV2(), " | ") + " || " + strings.Join(s.Args[1].limitsV2(), " | ") + " || " + s.Checks[0].Limit()
	want := `items <= 3 | each item object {oldText length <= 10; newText length <= 10, optional} with no other fields || each item matches /srv/.+ | must satisfy self.size() > 0 (at least one) || args.edits.size() < 3`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if l := s.Args[2].limitsV2(); l != nil {
		t.Fatalf("a v1 argument has v2 limits: %v", l)
	}
}
