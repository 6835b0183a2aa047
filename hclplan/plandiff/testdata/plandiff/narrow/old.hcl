plan "refund-4711" {
  goal         = "Refund order 4711 (at most 300 EUR), email the customer, close the ticket"
  expires      = "2027-06-30T23:59:59Z"
  order        = "any"
  on_violation = "hold"

  upstream {
    command = ["node", "server.js"]
    env     = ["WINDMILL_TOKEN", "STRIPE_KEY"]
  }

  step "lookup" {
    tool      = "get_order"
    max_calls = 10
    arg "order_id" { any = true }
  }

  step "refund" {
    tool      = "refund_customer"
    max_calls = 3
    arg "order_id" { eq = "4711" }
    arg "amount" {
      min = 0
      max = 300
    }
    arg "currency" { enum = ["EUR", "USD"] }
    arg "note" {
      any      = true
      optional = true
    }
    arg "reason" {
      max_length = 100
      optional   = true
    }
  }

  step "email" {
    tool = "send_email"
    arg "to" { pattern = "^customer-[0-9]+@example\\.com$" }
    arg "body" { max_length = 5000 }
  }

  step "close" {
    tool = "close_ticket"
    arg "ticket_id" { eq = "T-4711" }
    arg "comment" { any = true }
  }

  step "delete" {
    tool = "delete_order"
    arg "order_id" { eq = "4711" }
  }
}
