package hclplan

import (
	"fmt"
	"strings"
	"testing"
)

// bigPlan returns a plan with n steps of five constrained arguments each.
func bigPlan(n int) []byte {
	var b strings.Builder
	b.WriteString("plan \"big\" {\n  goal    = \"a plan with many steps\"\n  expires = \"2030-01-01T00:00:00Z\"\n  order   = \"any\"\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `
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
	b.WriteString("}\n")
	return []byte(b.String())
}

func BenchmarkParse500Steps(b *testing.B) {
	src := bigPlan(500)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, diags := Parse("big.hcl", src); diags.HasErrors() {
			b.Fatal(diags.Error())
		}
	}
}

func BenchmarkFormat500Steps(b *testing.B) {
	src := bigPlan(500)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, diags := Format("big.hcl", src); diags.HasErrors() {
			b.Fatal(diags.Error())
		}
	}
}

// twentyArgs is a step with 20 arguments of every constraint kind and a call
// that satisfies all of them: the whole check runs.
func twentyArgs(b *testing.B) (*Step, map[string]any) {
	var body strings.Builder
	args := "{"
	for i := 0; i < 20; i++ {
		switch i % 5 {
		case 0:
			fmt.Fprintf(&body, "arg \"a%d\" { eq = \"v%d\" }\n", i, i)
			args += fmt.Sprintf(`"a%d": "v%d",`, i, i)
		case 1:
			fmt.Fprintf(&body, "arg \"a%d\" {\n  min = 1\n  max = 30\n}\n", i)
			args += fmt.Sprintf(`"a%d": 29.5,`, i)
		case 2:
			fmt.Fprintf(&body, "arg \"a%d\" { enum = [\"EUR\", \"USD\", \"GBP\"] }\n", i)
			args += fmt.Sprintf(`"a%d": "GBP",`, i)
		case 3:
			fmt.Fprintf(&body, "arg \"a%d\" { pattern = \"customer-[0-9]+@example\\\\.com\" }\n", i)
			args += fmt.Sprintf(`"a%d": "customer-4711@example.com",`, i)
		case 4:
			fmt.Fprintf(&body, "arg \"a%d\" { max_length = 200 }\n", i)
			args += fmt.Sprintf(`"a%d": "a short note for the customer",`, i)
		}
	}
	args = strings.TrimSuffix(args, ",") + "}"
	return stepFrom(b, body.String()), decode(b, args)
}

func BenchmarkCheck20Args(b *testing.B) {
	s, args := twentyArgs(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Check(args); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckBlockedUndeclared(b *testing.B) {
	s, args := twentyArgs(b)
	args["extra"] = "smuggled"
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Check(args); err == nil {
			b.Fatal("allowed")
		}
	}
}
