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
		if strings.HasSuffix(f, "_test.hcl") {
			continue // a plan's tests, not a plan
		}
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
