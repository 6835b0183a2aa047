package plandiff

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/planlock/planlock/hclplan"
)

func parsePlanFile(t testing.TB, path string) *hclplan.Plan {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, diags := hclplan.Parse(path, src)
	if diags.HasErrors() {
		t.Fatalf("%s: %v", path, diags)
	}
	return p
}

// Each testdata/powerdiff/<case> holds the approved plan (old.hcl), the
// proposed one (new.hcl) and the expected PR text (diff.md).
func TestPowerDiffGolden(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "plandiff", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			old := parsePlanFile(t, filepath.Join(dir, "old.hcl"))
			proposed := parsePlanFile(t, filepath.Join(dir, "new.hcl"))
			got := Format("main", Diff(old, proposed))
			golden(t, filepath.Join("plandiff", filepath.Base(dir), "diff.md"), []byte(got))
		})
	}
}

// Widening and narrowing are mirror images: every "more" one way is a
// "less" the other way.
func TestPowerDiffIsSymmetric(t *testing.T) {
	a := parsePlanFile(t, filepath.Join("testdata", "plandiff", "widen", "old.hcl"))
	b := parsePlanFile(t, filepath.Join("testdata", "plandiff", "widen", "new.hcl"))
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
	if m1 != l2 || l1 != m2 || c1 != c2 || m1 == 0 {
		t.Errorf("widen: %d more %d less %d changed; narrow: %d more %d less %d changed", m1, l1, c1, m2, l2, c2)
	}
	if cs := Diff(a, a); len(cs) != 0 {
		t.Errorf("a plan differs from itself: %+v", cs)
	}
}
