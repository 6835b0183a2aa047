package plandiff

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/planlock/planlock/hclplan"
)

// Nested constraints and CEL checks widen and narrow symmetrically too.
func TestPowerDiffNestedIsSymmetric(t *testing.T) {
	a := parsePlanFile(t, filepath.Join("testdata", "plandiff", "nested", "old.hcl"))
	b := parsePlanFile(t, filepath.Join("testdata", "plandiff", "nested", "new.hcl"))
	count := func(cs []Change) (more, less, changed int) {
		for _, c := range cs {
			switch c.Power {
			case Wider:
				more++
			case Narrower:
				less++
			default:
				changed++
			}
		}
		return
	}
	m1, l1, c1 := count(Diff(a, b))
	m2, l2, c2 := count(Diff(b, a))
	if m1 != l2 || l1 != m2 || c1 != c2 || m1 == 0 || l1 == 0 {
		t.Errorf("widen: %d more %d less %d changed; back: %d more %d less %d changed", m1, l1, c1, m2, l2, c2)
	}
	if cs := Diff(b, b); len(cs) != 0 {
		t.Errorf("a plan differs from itself: %+v", cs)
	}
}

func TestPowerDiffNestedCases(t *testing.T) {
	step := func(arg string) string {
		return "plan \"p\" {\n  goal = \"g\"\n  step \"s\" {\n    tool = \"t\"\n" + arg + "\n  }\n}\n"
	}
	tests := []struct {
		name     string
		old, new string
		want     string // one change, "<power> <text>"
	}{
		{"items added", step(`arg "l" { max_length = 3 }`), step("arg \"l\" {\n  max_length = 3\n  items { enum = [\"bug\"] }\n}"), `less step ` + "`s`" + `, argument ` + "`l`" + `: every item must now be one of ` + "`\"bug\"`"},
		{"field added to open object", step("arg \"o\" {\n  any_other_fields = true\n  field \"a\" { any = true }\n}"), step("arg \"o\" {\n  any_other_fields = true\n  field \"a\" { any = true }\n  field \"b\" { eq = 1 }\n}"), "changed step `s`, argument `o`: field `b` is now constrained: = `1` (was any value)"},
		{"closed object opened", step("arg \"o\" {\n  field \"a\" { any = true }\n}"), step("arg \"o\" {\n  any_other_fields = true\n  field \"a\" { any = true }\n}"), "more step `s`, argument `o`: undeclared fields are now allowed"},
		{"expr message changed", step("arg \"a\" {\n  expr    = \"self > 1\"\n  message = \"x\"\n}"), step("arg \"a\" {\n  expr    = \"self > 1\"\n  message = \"y\"\n}"), "changed step `s`, argument `a`: check message changed to “y”"},
		{"expr changed", step(`arg "a" { expr = "self > 1" }`), step(`arg "a" { expr = "self > 0" }`), "changed step `s`, argument `a`: check changed from `self > 1` to `self > 0` (read it: it may allow more)"},
		{"min_items raised", step(`arg "a" { min_items = 1 }`), step(`arg "a" { min_items = 2 }`), "less step `s`, argument `a`: min_items narrowed 1 → 2"},
	}
	names := map[Power]string{Wider: "more", Narrower: "less", Changed: "changed"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := Diff(parsePlanSrc(t, tt.old), parsePlanSrc(t, tt.new))
			var got []string
			for _, c := range cs {
				got = append(got, names[c.Power]+" "+c.Text)
			}
			if strings.Join(got, "\n") != tt.want {
				t.Fatalf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), tt.want)
			}
		})
	}
}

func parsePlanSrc(t testing.TB, src string) *hclplan.Plan {
	t.Helper()
	p, diags := hclplan.Parse("p.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatalf("%v\n%s", diags, src)
	}
	return p
}

// Input rules (multi-round calls): a new kind of input request, or a wider
// bound, is more power; dropping one is less.
func TestPowerDiffInput(t *testing.T) {
	step := func(input string) string {
		return "plan \"p\" {\n  goal = \"g\"\n  step \"s\" {\n    tool = \"t\"\n" + input + "\n  }\n}\n"
	}
	none := step("")
	sampling := step("input {\n  sampling { max_tokens = 10 }\n}")
	wider := step("input {\n  sampling { max_tokens = 20 }\n}")
	names := map[Power]string{Wider: "more", Narrower: "less", Changed: "changed"}
	for _, tt := range []struct {
		name, old, new string
		want           []string
	}{
		{"allowed", none, sampling, []string{"more step `s`: now allows: Input requests: at most 1 round per call",
			"more step `s`: now allows: Sampling (an LLM completion the upstream asks the client for), at most 10 tokens and 10 messages"}},
		{"dropped", sampling, none, []string{"less step `s`: no longer allows: Input requests: at most 1 round per call",
			"less step `s`: no longer allows: Sampling (an LLM completion the upstream asks the client for), at most 10 tokens and 10 messages"}},
		{"bound raised", sampling, wider, []string{"more step `s`: now allows: Sampling (an LLM completion the upstream asks the client for), at most 20 tokens and 10 messages",
			"less step `s`: no longer allows: Sampling (an LLM completion the upstream asks the client for), at most 10 tokens and 10 messages"}},
		{"same", sampling, sampling, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, c := range Diff(parsePlanSrc(t, tt.old), parsePlanSrc(t, tt.new)) {
				got = append(got, names[c.Power]+" "+c.Text)
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("diff\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// A resource's input block is power like a step's: a read that may now ask
// the client for something is wider.
func TestPowerDiffResourceInput(t *testing.T) {
	res := func(input string) string {
		return "plan \"p\" {\n  goal = \"g\"\n  resource \"r\" {\n    uri = \"test://r\"\n" + input + "\n  }\n}\n"
	}
	none, sampling := res(""), res("input {\n  sampling { max_tokens = 10 }\n}")
	names := map[Power]string{Wider: "more", Narrower: "less", Changed: "changed"}
	for _, tt := range []struct {
		name, old, new string
		want           []string
	}{
		{"allowed", none, sampling, []string{"more resource `r`: now allows: Input requests: at most 1 round per call",
			"more resource `r`: now allows: Sampling (an LLM completion the upstream asks the client for), at most 10 tokens and 10 messages"}},
		{"dropped", sampling, none, []string{"less resource `r`: no longer allows: Input requests: at most 1 round per call",
			"less resource `r`: no longer allows: Sampling (an LLM completion the upstream asks the client for), at most 10 tokens and 10 messages"}},
		{"same", sampling, sampling, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, c := range Diff(parsePlanSrc(t, tt.old), parsePlanSrc(t, tt.new)) {
				got = append(got, names[c.Power]+" "+c.Text)
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("diff\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
