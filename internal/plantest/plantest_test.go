package plantest

import (
	"strings"
	"testing"
	"time"

	"github.com/planlock/planlock/hclplan"
)

const planSrc = `plan "p" {
  goal = "test the tests"
  step "lookup" {
    tool      = "get_order"
    max_calls = 2
    arg "id" { eq = "1" }
  }
  step "refund" {
    tool     = "refund"
    on_error = "hold"
    arg "amount" { max = 30 }
    pin {
      tool  = "get_script"
      field = "hash"
      eq    = "abc"
    }
  }
  step "mail" {
    tool     = "mail"
    approval = "each"
  }
}
`

func TestRun(t *testing.T) {
	plan, diags := hclplan.Parse("p.hcl", []byte(planSrc))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		src     string
		pass    bool
		problem string // in the first failing call's problem or the test's error
	}{
		{"allow then order", `test "t" {
  call {
    tool = "refund"
    args = { amount = 1 }
    expect = "block"
    reason_contains = "needs a successful call first"
  }
  call {
    tool = "get_order"
    args = { id = "1" }
    expect = "allow"
  }
}`, true, ""},
		{"max_calls counted across calls", `test "t" {
  call {
    tool = "get_order"
    args = { id = "1" }
    expect = "allow"
  }
  call {
    tool = "get_order"
    args = { id = "1" }
    expect = "allow"
  }
  call {
    tool = "get_order"
    args = { id = "1" }
    expect = "block"
    reason_step = "lookup"
  }
}`, true, ""},
		{"each test starts fresh", `test "a" {
  call {
    tool = "get_order"
    args = { id = "1" }
    expect = "allow"
  }
}
test "b" {
  call {
    tool = "refund"
    args = { amount = 1 }
    expect = "block"
  }
}`, true, ""},
		{"pin matches, differs, fails", `test "t" {
  pin {
    step = "refund"
    value = "abc"
  }
  call {
    tool = "get_order"
    args = { id = "1" }
    expect = "allow"
  }
  call {
    tool = "refund"
    args = { amount = 5 }
    expect = "allow"
  }
}
test "u" {
  pin {
    step = "refund"
    value = "xyz"
  }
  call {
    tool = "get_order"
    args = { id = "1" }
    expect = "allow"
  }
  call {
    tool = "refund"
    args = { amount = 5 }
    expect = "hold"
    reason_contains = "changed since the plan was approved"
  }
}
test "v" {
  pin {
    step = "refund"
    fails = true
  }
  call {
    tool = "get_order"
    args = { id = "1" }
    expect = "allow"
  }
  call {
    tool = "refund"
    args = { amount = 5 }
    expect = "hold"
    reason_contains = "failed"
  }
}`, true, ""},
		{"on_error hold after a failed call", `test "t" {
  pin {
    step = "refund"
    value = "abc"
  }
  call {
    tool = "get_order"
    args = { id = "1" }
    expect = "allow"
  }
  call {
    tool = "refund"
    args = { amount = 5 }
    fails = true
    expect = "allow"
  }
  call {
    tool = "mail"
    expect = "block"
    reason_contains = "needs a successful call first"
  }
}`, true, ""},
		{"approval each holds", `test "t" {
  pin {
    step = "refund"
    value = "abc"
  }
  call {
    tool = "get_order"
    args = { id = "1" }
    expect = "allow"
  }
  call {
    tool = "refund"
    args = { amount = 5 }
    expect = "allow"
  }
  call {
    tool = "mail"
    expect = "block"
  }
}`, false, "got hold, want block"},
		{"wrong expectation fails", `test "t" {
  call {
    tool = "get_order"
    args = { id = "2" }
    expect = "allow"
  }
}`, false, "got block, want allow"},
		{"wrong reason_arg fails", `test "t" {
  call {
    tool = "get_order"
    args = { id = "2" }
    expect = "block"
    reason_arg = "amount"
  }
}`, false, `not for argument "amount"`},
		{"wrong reason_step fails", `test "t" {
  call {
    tool = "get_order"
    args = { id = "2" }
    expect = "block"
    reason_step = "refund"
  }
}`, false, `want step "refund"`},
		{"pinned step without a pin", `test "t" {
  call {
    tool = "get_order"
    args = { id = "1" }
    expect = "allow"
  }
  call {
    tool = "refund"
    args = { amount = 5 }
    expect = "allow"
  }
}`, false, `step "refund" is pinned`},
		{"pin of a step without pin", `test "t" {
  pin {
    step = "lookup"
    value = "x"
  }
  call {
    tool = "get_order"
    args = { id = "1" }
    expect = "allow"
  }
}`, false, "that step has no pin"},
		{"unplanned tool", `test "t" {
  call {
    tool = "delete_everything"
    expect = "allow"
  }
}`, false, `is not in plan`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tf, diags := hclplan.ParseTests("p_test.hcl", []byte(tt.src))
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			rs := Run(plan, tf, now)
			pass := true
			var problems []string
			for _, r := range rs {
				pass = pass && r.Pass
				problems = append(problems, r.Error)
				for _, c := range r.Calls {
					problems = append(problems, c.Problem)
				}
			}
			if pass != tt.pass {
				t.Fatalf("pass = %v, want %v; problems %q", pass, tt.pass, problems)
			}
			if tt.problem != "" && !strings.Contains(strings.Join(problems, "\n"), tt.problem) {
				t.Fatalf("problems %q do not contain %q", problems, tt.problem)
			}
		})
	}
}

func TestParseTestsDiagnostics(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"no tests", ``, "No test block"},
		{"no calls", `test "t" {}`, "Test has no calls"},
		{"bad expect", "test \"t\" {\n  call {\n    tool = \"a\"\n    expect = \"maybe\"\n  }\n}", "Invalid expect"},
		{"args not an object", "test \"t\" {\n  call {\n    tool = \"a\"\n    args = [1]\n    expect = \"allow\"\n  }\n}", "Invalid call args"},
		{"duplicate test", "test \"t\" {\n  call {\n    tool = \"a\"\n    expect = \"allow\"\n  }\n}\ntest \"t\" {\n  call {\n    tool = \"a\"\n    expect = \"allow\"\n  }\n}", "Duplicate test name"},
		{"pin value and fails", "test \"t\" {\n  pin {\n    step = \"s\"\n    value = 1\n    fails = true\n  }\n  call {\n    tool = \"a\"\n    expect = \"allow\"\n  }\n}", "both value and fails"},
		{"pin without value", "test \"t\" {\n  pin {\n    step = \"s\"\n  }\n  call {\n    tool = \"a\"\n    expect = \"allow\"\n  }\n}", "pin without value"},
		{"bad now", "test \"t\" {\n  now = \"tomorrow\"\n  call {\n    tool = \"a\"\n    expect = \"allow\"\n  }\n}", "Invalid now"},
		{"syntax", "test \"t\" {", "Unclosed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tf, diags := hclplan.ParseTests("x_test.hcl", []byte(tt.src))
			if tf != nil || !diags.HasErrors() {
				t.Fatalf("want errors, got %v", diags)
			}
			if !strings.Contains(diags.Error(), tt.want) {
				t.Fatalf("diagnostics %q do not contain %q", diags.Error(), tt.want)
			}
			for _, d := range diags {
				if d.Subject == nil || d.Subject.Filename != "x_test.hcl" {
					t.Fatalf("diagnostic without a place: %v", d)
				}
			}
		})
	}
}
