# Tests suggested by planlock plan suggest: the observed calls are allowed,
# calls just outside each learned bound are blocked. Run: planlock plan test.

test "observed run 1 is allowed" {
  call {
    tool = "get_order"
    args = {
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "get_order"
    args = {
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "refund_customer"
    args = {
      amount   = 10
      currency = "EUR"
      note     = "a"
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "refund_customer"
    args = {
      amount   = 25.5
      currency = "EUR"
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "refund_customer"
    args = {
      amount   = 30
      currency = "EUR"
      note     = "bb"
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "send_email"
    args = {
      body = "one"
      to   = "c@example.com"
    }
    expect = "allow"
  }
  call {
    tool = "send_email"
    args = {
      body = "two"
      to   = "c@example.com"
    }
    expect = "allow"
  }
  call {
    tool = "send_email"
    args = {
      body = "three"
      to   = "c@example.com"
    }
    expect = "allow"
  }
  call {
    tool = "send_email"
    args = {
      body = "four"
      to   = "c@example.com"
    }
    expect = "allow"
  }
  call {
    tool = "send_email"
    args = {
      body = "five"
      to   = "c@example.com"
    }
    expect = "allow"
  }
  call {
    tool = "send_email"
    args = {
      body = "six, the longest"
      to   = "c@example.com"
    }
    expect = "allow"
  }
}

test "observed run 2 is allowed" {
  call {
    tool = "get_order"
    args = {
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "refund_customer"
    args = {
      amount   = 5
      currency = "EUR"
      order_id = "4711"
    }
    expect = "allow"
  }
}

test "step get_order: argument order_id other than the observed value is blocked" {
  call {
    tool = "get_order"
    args = {
      order_id = "4711x"
    }
    expect     = "block"
    reason_arg = "order_id"
  }
}

test "step get_order: an argument never observed is blocked" {
  call {
    tool = "get_order"
    args = {
      order_id           = "4711"
      unplanned_argument = "x"
    }
    expect     = "block"
    reason_arg = "unplanned_argument"
  }
}

test "step get_order: call 4 is over max_calls" {
  call {
    tool = "get_order"
    args = {
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "get_order"
    args = {
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "get_order"
    args = {
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "get_order"
    args = {
      order_id = "4711"
    }
    expect          = "block"
    reason_contains = "max_calls"
  }
}

test "step refund_customer: argument amount above the observed maximum is blocked" {
  call {
    tool = "get_order"
    args = {
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "refund_customer"
    args = {
      amount   = 60
      currency = "EUR"
      note     = "a"
      order_id = "4711"
    }
    expect     = "block"
    reason_arg = "amount"
  }
}

test "step refund_customer: argument amount below the observed minimum is blocked" {
  call {
    tool = "get_order"
    args = {
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "refund_customer"
    args = {
      amount   = 0
      currency = "EUR"
      note     = "a"
      order_id = "4711"
    }
    expect     = "block"
    reason_arg = "amount"
  }
}

test "step refund_customer: argument currency other than the observed value is blocked" {
  call {
    tool = "get_order"
    args = {
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "refund_customer"
    args = {
      amount   = 10
      currency = "EURx"
      note     = "a"
      order_id = "4711"
    }
    expect     = "block"
    reason_arg = "currency"
  }
}

test "step refund_customer: argument note outside the observed values is blocked" {
  call {
    tool = "get_order"
    args = {
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "refund_customer"
    args = {
      amount   = 10
      currency = "EUR"
      note     = "ax"
      order_id = "4711"
    }
    expect     = "block"
    reason_arg = "note"
  }
}

test "step refund_customer: argument order_id other than the observed value is blocked" {
  call {
    tool = "get_order"
    args = {
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "refund_customer"
    args = {
      amount   = 10
      currency = "EUR"
      note     = "a"
      order_id = "4711x"
    }
    expect     = "block"
    reason_arg = "order_id"
  }
}

test "step refund_customer: an argument never observed is blocked" {
  call {
    tool = "get_order"
    args = {
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "refund_customer"
    args = {
      amount             = 10
      currency           = "EUR"
      note               = "a"
      order_id           = "4711"
      unplanned_argument = "x"
    }
    expect     = "block"
    reason_arg = "unplanned_argument"
  }
}

test "step refund_customer: call 6 is over max_calls" {
  call {
    tool = "get_order"
    args = {
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "refund_customer"
    args = {
      amount   = 10
      currency = "EUR"
      note     = "a"
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "refund_customer"
    args = {
      amount   = 10
      currency = "EUR"
      note     = "a"
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "refund_customer"
    args = {
      amount   = 10
      currency = "EUR"
      note     = "a"
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "refund_customer"
    args = {
      amount   = 10
      currency = "EUR"
      note     = "a"
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "refund_customer"
    args = {
      amount   = 10
      currency = "EUR"
      note     = "a"
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "refund_customer"
    args = {
      amount   = 10
      currency = "EUR"
      note     = "a"
      order_id = "4711"
    }
    expect          = "block"
    reason_contains = "max_calls"
  }
}

test "step send_email: argument body longer than observed is blocked" {
  call {
    tool = "get_order"
    args = {
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "refund_customer"
    args = {
      amount   = 10
      currency = "EUR"
      note     = "a"
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "send_email"
    args = {
      body = "xxxxxxxxxxxxxxxxx"
      to   = "c@example.com"
    }
    expect     = "block"
    reason_arg = "body"
  }
}

test "step send_email: argument to other than the observed value is blocked" {
  call {
    tool = "get_order"
    args = {
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "refund_customer"
    args = {
      amount   = 10
      currency = "EUR"
      note     = "a"
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "send_email"
    args = {
      body = "one"
      to   = "c@example.comx"
    }
    expect     = "block"
    reason_arg = "to"
  }
}

test "step send_email: an argument never observed is blocked" {
  call {
    tool = "get_order"
    args = {
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "refund_customer"
    args = {
      amount   = 10
      currency = "EUR"
      note     = "a"
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "send_email"
    args = {
      body               = "one"
      to                 = "c@example.com"
      unplanned_argument = "x"
    }
    expect     = "block"
    reason_arg = "unplanned_argument"
  }
}

test "step send_email: call 10 is over max_calls" {
  call {
    tool = "get_order"
    args = {
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "refund_customer"
    args = {
      amount   = 10
      currency = "EUR"
      note     = "a"
      order_id = "4711"
    }
    expect = "allow"
  }
  call {
    tool = "send_email"
    args = {
      body = "one"
      to   = "c@example.com"
    }
    expect = "allow"
  }
  call {
    tool = "send_email"
    args = {
      body = "one"
      to   = "c@example.com"
    }
    expect = "allow"
  }
  call {
    tool = "send_email"
    args = {
      body = "one"
      to   = "c@example.com"
    }
    expect = "allow"
  }
  call {
    tool = "send_email"
    args = {
      body = "one"
      to   = "c@example.com"
    }
    expect = "allow"
  }
  call {
    tool = "send_email"
    args = {
      body = "one"
      to   = "c@example.com"
    }
    expect = "allow"
  }
  call {
    tool = "send_email"
    args = {
      body = "one"
      to   = "c@example.com"
    }
    expect = "allow"
  }
  call {
    tool = "send_email"
    args = {
      body = "one"
      to   = "c@example.com"
    }
    expect = "allow"
  }
  call {
    tool = "send_email"
    args = {
      body = "one"
      to   = "c@example.com"
    }
    expect = "allow"
  }
  call {
    tool = "send_email"
    args = {
      body = "one"
      to   = "c@example.com"
    }
    expect = "allow"
  }
  call {
    tool = "send_email"
    args = {
      body = "one"
      to   = "c@example.com"
    }
    expect          = "block"
    reason_contains = "max_calls"
  }
}

test "a tool never observed is blocked" {
  call {
    tool            = "unplanned_tool"
    args            = {}
    expect          = "block"
    reason_contains = "is not in plan"
  }
}
