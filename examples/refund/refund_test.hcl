# Tests of refund.hcl, run by "planlock plan test examples/refund/refund.hcl".
# They live beside the plan, not in it, so they change without a new approval.

test "the whole refund in order" {
  pin {
    step  = "refund"
    value = "9f86d081884c7d65"
  }
  call {
    tool   = "get_order"
    args   = { order_id = "4711" }
    expect = "allow"
  }
  call {
    tool   = "refund_customer"
    args   = { order_id = "4711", amount = 30, currency = "EUR" }
    expect = "allow"
  }
  call {
    tool        = "send_email"
    args        = { to = "customer-4711@example.com", body = "Your refund is on its way." }
    expect      = "hold"
    reason_step = "email"
  }
}

test "refund above the limit" {
  pin {
    step  = "refund"
    value = "9f86d081884c7d65"
  }
  call {
    tool   = "get_order"
    args   = { order_id = "4711" }
    expect = "allow"
  }
  call {
    tool       = "refund_customer"
    args       = { order_id = "4711", amount = 31, currency = "EUR" }
    expect     = "block"
    reason_arg = "amount"
  }
}

test "one refund only" {
  pin {
    step  = "refund"
    value = "9f86d081884c7d65"
  }
  call {
    tool   = "get_order"
    args   = { order_id = "4711" }
    expect = "allow"
  }
  call {
    tool   = "refund_customer"
    args   = { order_id = "4711", amount = 10, currency = "EUR" }
    expect = "allow"
  }
  call {
    tool            = "refund_customer"
    args            = { order_id = "4711", amount = 10, currency = "EUR" }
    expect          = "block"
    reason_contains = "max_calls 1 used up"
  }
}

test "no refund before the lookup" {
  call {
    tool            = "refund_customer"
    args            = { order_id = "4711", amount = 10, currency = "EUR" }
    expect          = "block"
    reason_contains = "needs a successful call first"
  }
}

test "a changed refund script holds" {
  pin {
    step  = "refund"
    value = "0000000000000000"
  }
  call {
    tool   = "get_order"
    args   = { order_id = "4711" }
    expect = "allow"
  }
  call {
    tool            = "refund_customer"
    args            = { order_id = "4711", amount = 10, currency = "EUR" }
    expect          = "hold"
    reason_contains = "changed since the plan was approved"
  }
}

test "a failed refund puts the step on hold" {
  pin {
    step  = "refund"
    value = "9f86d081884c7d65"
  }
  call {
    tool   = "get_order"
    args   = { order_id = "4711" }
    expect = "allow"
  }
  call {
    tool   = "refund_customer"
    args   = { order_id = "4711", amount = 10, currency = "EUR" }
    fails  = true
    expect = "allow"
  }
  call {
    tool            = "refund_customer"
    args            = { order_id = "4711", amount = 10, currency = "EUR" }
    expect          = "block"
    reason_contains = "max_calls"
  }
}

test "tools outside the plan are blocked" {
  call {
    tool   = "delete_customer"
    args   = { id = "4711" }
    expect = "block"
  }
}
