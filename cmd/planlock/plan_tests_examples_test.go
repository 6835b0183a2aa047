package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/planlock/planlock/hclplan"
)

// TestExamplePlansAreTested runs plan test over examples/: every example
// plan has tests, they pass, and between them they show allowed and blocked
// calls (and held ones where the plan can hold).
func TestExamplePlansAreTested(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"planlock", "plan", "test", "--json", "--recursive", "../../examples"}, streams{out: &out, err: &errb})
	if code != 0 {
		t.Fatalf("plan test examples: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	var res struct {
		Pass  bool
		Plans []planTestReport
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	plans, err := filepath.Glob("../../examples/*/*.hcl")
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, p := range plans {
		if filepath.Ext(p) == ".hcl" && !bytes.HasSuffix([]byte(p), []byte("_test.hcl")) {
			want++
		}
	}
	if len(res.Plans) != want {
		t.Fatalf("plan test ran %d plans, the examples have %d", len(res.Plans), want)
	}
	for _, p := range res.Plans {
		if p.Status != "ok" {
			t.Errorf("%s: %s", p.Plan, p.Status)
			continue
		}
		got := map[string]bool{}
		for _, tr := range p.Result {
			for _, c := range tr.Calls {
				got[c.Got] = true
			}
		}
		src, err := os.ReadFile(p.Plan)
		if err != nil {
			t.Fatal(err)
		}
		plan, diags := hclplan.Parse(p.Plan, src)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		canHold := plan.OnViolation == hclplan.ViolationHold
		for _, s := range plan.Steps {
			canHold = canHold || s.Approval == hclplan.ApprovalEach || s.Pin != nil || s.OnError == hclplan.ErrorHold
		}
		want := []string{"allow", "block"}
		if len(plan.Steps) == 0 {
			want = []string{"block"} // no tool may be called: nothing to allow
		}
		for _, k := range want {
			if !got[k] {
				t.Errorf("%s: no test call is decided %q", p.Plan, k)
			}
		}
		if canHold && !got["hold"] {
			t.Errorf("%s: the plan can hold, but no test call is held", p.Plan)
		}
	}
}
