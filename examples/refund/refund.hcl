plan "refund-4711" {
  goal         = "Refund order 4711 (at most 30 EUR), email the customer, close the ticket"
  order        = "sequential" # "sequential" (default) or "any"
  on_violation = "block"      # "block" (default) or "hold": ask a human via PR

  upstream {                      # optional; the CLI may give it instead (see proxy)
    command = ["./refund-server"] # stdio upstream (go build -o refund-server ./server) ...
    # url   = "http://127.0.0.1:8000/mcp"   # ... or streamable HTTP, exactly one of the two
    env = ["WINDMILL_TOKEN"] # variables passed to a stdio upstream; no others
  }

  step "lookup" {
    tool      = "get_order"
    max_calls = 3 # default 1
    arg "order_id" { eq = "4711" }
  }

  step "refund" {
    tool      = "refund_customer"
    max_calls = 1
    on_error  = "hold" # "continue" (default) or "hold"
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
    pin { # re-read before every call of this step
      tool  = "get_script_by_path"
      args  = { path = "f/support/refund_customer" }
      field = "hash" # dotted path into the pin call's JSON result
      eq    = "9f86d081884c7d65"
    }
  }

  step "email" {
    tool     = "send_email"
    approval = "each" # every call of this step is a Hold
    arg "to" { pattern = "^customer-4711@example\\.com$" }
    arg "body" { max_length = 2000 }
  }

  step "close" {
    tool = "close_ticket"
    arg "ticket_id" { eq = "T-4711" }
    arg "comment" { any = true }
  }
}
