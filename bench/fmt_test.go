package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclwrite"

	"github.com/planlock/planlock/hclplan"
)

// bigPlan is a plan of n steps with five constrained arguments each (the
// shape of hclplan's own 500-step benchmarks), in canonical format.
func bigPlan(b *testing.B, n int) []byte {
	b.Helper()
	var s strings.Builder
	s.WriteString("plan \"big\" {\n  goal    = \"a plan with many steps\"\n  expires = \"2030-01-01T00:00:00Z\"\n  order   = \"any\"\n")
	for i := range n {
		fmt.Fprintf(&s, `
  step "s%d" {
    tool      = "tool_%d"
    max_calls = %d
    arg "id" { eq = "%d" }
    arg "amount" {
      min = 1
      max = 30
    }
    arg "currency" { enum = ["EUR", "USD"] }
    arg "email" { pattern = "^[a-z]+@example\\.com$" }
    arg "note" {
      max_length = 200
      optional   = true
    }
  }
`, i, i, i%5+1, i)
	}
	s.WriteString("}\n")
	out, diags := hclplan.Format("big.hcl", []byte(s.String()))
	if diags.HasErrors() {
		b.Fatal(diags.Error())
	}
	return out
}

// BenchmarkCLI500Steps runs each command on a 500-step plan as a user does
// (one process per run, start-up included). hclfmt, the HCL module's own
// formatter, is the reference: it parses and formats without knowing plans.
func BenchmarkCLI500Steps(b *testing.B) {
	file := filepath.Join(b.TempDir(), "big.hcl")
	if err := os.WriteFile(file, bigPlan(b, 500), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"hclfmt", []string{bin(b, "hclfmt"), file}},
		{"hclfmt-check", []string{bin(b, "hclfmt"), "-check", file}},
		{"plan-fmt", []string{bin(b, "planlock"), "plan", "fmt", "--check", file}},
		{"plan-validate", []string{bin(b, "planlock"), "plan", "validate", file}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			for b.Loop() {
				cmd := exec.Command(tt.args[0], tt.args[1:]...)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				if err := cmd.Run(); err != nil {
					b.Fatalf("%v: %v\n%s", tt.args, err, stderr.Bytes())
				}
			}
		})
	}
}

// BenchmarkInProcess500Steps is the same work without process start-up:
// planlock's parse (with the plan language's checks) and format against the
// HCL module's parse and format of the same bytes.
func BenchmarkInProcess500Steps(b *testing.B) {
	src := bigPlan(b, 500)
	for _, tt := range []struct {
		name string
		run  func() error
	}{
		// What hclfmt does to a file: format only.
		{"hclfmt", func() error {
			_ = hclwrite.Format(src)
			return nil
		}},
		// What hclfmt -check does: parse for diagnostics, then format.
		{"hclfmt-check", func() error {
			if _, diags := hclparse.NewParser().ParseHCL(src, "big.hcl"); diags.HasErrors() {
				return diags
			}
			_ = hclwrite.Format(src)
			return nil
		}},
		{"plan-format", func() error {
			if _, diags := hclplan.Format("big.hcl", src); diags.HasErrors() {
				return diags
			}
			return nil
		}},
		{"plan-parse", func() error {
			if _, diags := hclplan.Parse("big.hcl", src); diags.HasErrors() {
				return diags
			}
			return nil
		}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				if err := tt.run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
