// Package testplans holds the plans the proxy's unit tests and the
// end-to-end tests both run, so that the two suites test the same plans.
package testplans

import "strings"

// GoodHash is the refund script's hash the Refund plan pins.
const GoodHash = "9f86d081884c7d65"

// Refund is the refund story's plan: a look-up, a pinned refund that holds
// on error, an email that needs an approval for each call, and a close.
const Refund = `
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

// Faults allows the test upstream's tools in any order.
const Faults = `
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

// AnyOrder drops a plan's step order, so that a test reaches the step it is
// about.
func AnyOrder(src string) string {
	return strings.Replace(src, `goal = `, `order = "any"
  goal = `, 1)
}
