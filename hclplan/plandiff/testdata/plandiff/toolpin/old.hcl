plan "tools" {
  goal = "Refund and mail"

  step "refund" {
    tool = "refund_customer"
    arg "order_id" { eq = "4711" }
    tool_pin {
      digest      = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
      description = "Refund an order."
    }
  }

  step "mail" {
    tool = "send_email"
    arg "to" { any = true }
    tool_pin { digest = "sha256:2222222222222222222222222222222222222222222222222222222222222222" }
  }

  step "close" {
    tool = "close_ticket"
  }
}
