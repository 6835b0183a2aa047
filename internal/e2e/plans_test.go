//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// The plans of the tests, as in package proxy's own tests.

const goodHash = "9f86d081884c7d65"

const refundPlan = `
plan "refund-4711" {
  goal = "Refund order 4711 (at most 30 EUR), email the customer, close the ticket"

  step "lookup" {
    tool      = "get_order"
    max_calls = 3
    arg "order_id" { eq = "4711" }
  }
  step "refund" {
    tool     = "refund_customer"
    on_error = "hold"
    arg "order_id" { eq = "4711" }
    arg "amount" {
      min = 1
      max = 30
    }
    arg "currency" { enum = ["EUR"] }
    arg "note" {
      max_length = 200
      optional   = true
    }
    pin {
      tool  = "get_script_by_path"
      args  = { path = "f/support/refund_customer" }
      field = "hash"
      eq    = "9f86d081884c7d65"
    }
  }
  step "email" {
    tool     = "send_email"
    approval = "each"
    arg "to"   { pattern = "^customer-4711@example\\.com$" }
    arg "body" { max_length = 2000 }
  }
  step "close" {
    tool = "close_ticket"
    arg "ticket_id" { eq = "T-4711" }
    arg "comment"   { any = true }
  }
}
`

// testPlan allows the test upstream's tools in any order.
const testPlan = `
plan "faults" {
  goal  = "exercise upstream faults"
  order = "any"
  step "echo" {
    tool      = "echo"
    max_calls = 10
    arg "message" { any = true }
  }
  step "slow" {
    tool      = "slow"
    max_calls = 10
    arg "ms" { any = true }
  }
  step "progress" {
    tool      = "progress"
    max_calls = 10
    arg "steps" { any = true }
  }
  step "sample" {
    tool = "sample"
    arg "prompt" { any = true }
  }
  step "elicit" {
    tool = "elicit"
    arg "message" { any = true }
  }
}
`

// anyOrder drops the order so that each test reaches the step it is about.
func anyOrder(src string) string {
	return strings.Replace(src, `goal = `, `order = "any"
  goal = `, 1)
}

// upstreamCalls counts the tools/call the upstream received, per tool.
func upstreamCalls(t *testing.T, callsLog string) map[string]int {
	t.Helper()
	f, err := os.Open(callsLog)
	if os.IsNotExist(err) {
		return map[string]int{}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct {
			Tool string `json:"tool"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("calls log: %v", err)
		}
		n[r.Tool]++
	}
	return n
}
