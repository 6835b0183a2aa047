package hclplan_test

import (
	"encoding/json"
	"fmt"

	"github.com/planlock/planlock/hclplan"
)

// Parsing a plan from its exact bytes: problems come back as HCL
// diagnostics with their source ranges, and a step checks arguments.
func ExampleParse() {
	_, diags := hclplan.Parse("bad.hcl", []byte(`plan "refund" {
  goal = "refund"
  step "refund" { max_calls = 0 }
}
`))
	for _, d := range diags {
		fmt.Printf("%s: %s\n", d.Subject, d.Summary)
	}

	plan, diags := hclplan.Parse("refund.hcl", []byte(`plan "refund" {
  goal = "refund order 4711"
  step "refund" {
    tool = "refund_customer"
    arg "amount" { max = 30 }
  }
}
`))
	if diags.HasErrors() {
		fmt.Println(diags)
		return
	}
	step := plan.Steps[0]
	fmt.Println(step.Tool, step.MaxCalls)
	fmt.Println(step.Check(map[string]any{"amount": json.Number("25")}))
	fmt.Println(step.Check(map[string]any{"amount": json.Number("31")}))
	// Output:
	// bad.hcl:3,19-19: Missing required argument
	// bad.hcl:3,31-32: Invalid max_calls
	// refund_customer 1
	// <nil>
	// step "refund": argument "amount" = 31 is above the maximum 30
}
