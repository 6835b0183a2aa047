plan "refund-4711" {
  goal         = "Refund order 4711 (at most 30 EUR), email the customer, close the ticket"
  expires      = "2026-12-31T23:59:59Z"
  order        = "sequential"
  on_violation = "block"

  upstream {
    command = ["node", "server.js"]

    env = ["WINDMILL_TOKEN"]
  }

  step "lookup" {
    tool      = "get_order"
    max_calls = 3
    arg "order_id" { eq = "4711" }
  }

  step "refund" {
    tool      = "refund_customer"
    max_calls = 1
    on_error  = "hold"
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
    arg "to" { pattern = "^customer-4711@example\\.com$" }
    arg "body" { max_length = 2000 }
  }

  step "close" {
    tool = "close_ticket"
    arg "ticket_id" { eq = "T-4711" }
    arg "comment" { any = true }
  }
}
