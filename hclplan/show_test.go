package hclplan

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestShowGolden(t *testing.T) {
	files, _ := filepath.Glob("../examples/*/*.hcl")
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".hcl")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			p, diags := Parse(filepath.Base(f), src)
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			golden(t, filepath.Join("show", name+".md"), []byte(Summary(p)))
			j, err := JSON(p)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("show", name+".json"), j)
			var back map[string]any
			if err := json.Unmarshal(j, &back); err != nil {
				t.Fatalf("JSON form is not JSON: %v", err)
			}
			if back["digest"] != Digest(src) {
				t.Errorf("JSON digest = %v, want %s", back["digest"], Digest(src))
			}
		})
	}
}

// The JSON form does not depend on how the file is laid out, only on what
// it says (except the digest, which is of the exact bytes).
func TestJSONStableAcrossLayout(t *testing.T) {
	a := "plan \"p\" {\n  goal = \"g\"\n  step \"s\" {\n    tool = \"t\"\n    arg \"x\" { eq = { b = 1, a = 2.50 } }\n  }\n}\n"
	b := "plan \"p\" {\ngoal=\"g\"\n\n\nstep \"s\" {\ntool=\"t\"\narg \"x\" {\neq={a=2.5,b=1.0}\n}\n}\n}\n"
	pa, da := Parse("a", []byte(a))
	pb, db := Parse("b", []byte(b))
	if da.HasErrors() || db.HasErrors() {
		t.Fatal(da, db)
	}
	ja, _ := JSON(pa)
	jb, _ := JSON(pb)
	sa := strings.Replace(string(ja), pa.Digest, "", 1)
	sb := strings.Replace(string(jb), pb.Digest, "", 1)
	if sa != sb {
		t.Fatalf("JSON differs:\n%s\n%s", sa, sb)
	}
	if !strings.Contains(sa, `"eq": {`) || !strings.Contains(sa, `"a": 2.5,`) {
		t.Fatalf("canonical JSON lost object order or number form:\n%s", sa)
	}
}

// A plan can say anything in its strings; the summary a reviewer reads on
// GitHub must still show all of it, literally, and everything after it.
func TestShowHostileStrings(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "show", "hostile.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	p, diags := Parse("hostile.hcl", src)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	got := Summary(p)
	golden(t, filepath.Join("show", "hostile.md"), []byte(got))
	for _, bad := range []string{"\n<!--", "\n# Heading", "\u202e", "\u200b", "\r", "\n- [x]"} {
		if strings.Contains(got, bad) {
			t.Errorf("summary contains %q raw", bad)
		}
	}
	// Every line the summary writes comes from its own template: the number
	// of lines does not depend on what the strings contain.
	if n, want := strings.Count(got, "\n"), 19; n != want {
		t.Errorf("summary has %d lines, want %d:\n%s", n, want, got)
	}
	if !strings.Contains(got, "at most 30000") {
		t.Error("the limit after the hostile goal is missing")
	}
}

func TestMarkdownCode(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", "`plain`"},
		{"", "` `"},
		{"a`b", "``a`b``"},
		{"`x`", "`` `x` ``"},
		{"a``b```c", "````a``b```c````"},
		{" lead", "`  lead `"},
		{"line\nbreak\r\ttab", "`line\\nbreak\\r\\ttab`"},
		{"<!-- x -->", "`<!-- x -->`"},
		{"zero\u200bwidth", "`zero\\u200bwidth`"},
		{"bidi\u202eevil\u2066", "`bidi\\u202eevil\\u2066`"},
		{"nbsp\u00a0x", "`nbsp\\u00a0x`"},
		{"bom\ufeff", "`bom\\ufeff`"},
		{"sep\u2028x", "`sep\\u2028x`"},
		{"bad\xffutf8", "`bad\\xffutf8`"},
		{"[x](javascript:alert(1)) | * _", "`[x](javascript:alert(1)) | * _`"},
		{"héllo €", "`héllo €`"},
	} {
		if got := MarkdownCode(tc.in); got != tc.want {
			t.Errorf("MarkdownCode(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
