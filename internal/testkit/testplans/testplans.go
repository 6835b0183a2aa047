// Package testplans holds the plans the proxy's unit tests and the
// end-to-end tests both run, so that the two suites test the same plans.
package testplans

import (
	"strconv"
	"strings"
)

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

// LegacySampling allows server-everything's sampling tool with sampling of
// at most 200 tokens: a 2025-era upstream's server-to-client request
// within the plan's bounds (maxTokens 100) and over them (1000).
const LegacySampling = `plan "ask" {
  goal  = "a legacy upstream's sampling request within the plan's bounds"
  order = "any"
  step "sample" {
    tool      = "trigger-sampling-request"
    max_calls = 5
    arg "prompt" { max_length = 50 }
    arg "maxTokens" { any = true }
    input {
      sampling { max_tokens = 200 }
    }
  }
}
`

// Logs allows the log tool and the log://note resource of
// test/peers/modern-server.mjs, which log at debug, info and error for a
// request as its log level asks, and echo.
const Logs = `plan "logs" {
  goal  = "log messages of the requests that ask for them"
  order = "any"
  step "log" {
    tool      = "log"
    max_calls = 5
  }
  step "echo" {
    tool      = "echo"
    max_calls = 5
    arg "message" { any = true }
  }
  resource "note" {
    uri       = "log://note"
    max_reads = 5
  }
}
`

// WithUpstreamCommand gives a plan of order "any" an upstream block that
// starts argv.
func WithUpstreamCommand(plan string, argv []string) string {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = strconv.Quote(a)
	}
	return withUpstream(plan, "command = ["+strings.Join(quoted, ", ")+"]")
}

// WithUpstreamURL gives a plan of order "any" an upstream block at url.
func WithUpstreamURL(plan, url string) string {
	return withUpstream(plan, "url = "+strconv.Quote(url))
}

func withUpstream(plan, attr string) string {
	return strings.Replace(plan, `order = "any"`, "order = \"any\"\n  upstream {\n    "+attr+"\n  }", 1)
}
