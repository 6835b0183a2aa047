# Suggested by planlock plan suggest from audit.jsonl: 13 forwarded calls in 2 runs.
# Every line says what it was learned from. Review each one: this plan allows
# what the agent did, no more; approve only what it should do.
plan "refund-4711" {
  goal  = "Replace with what this agent is for (learned from observed calls)"
  order = "sequential" # every run called the tools in this order, each in one stretch

  step "get_order" {
    tool      = "get_order" # called 3 times
    max_calls = 3           # at most 2 calls in one run, plus a margin of 50%
    arg "order_id" {        # learned from 3 calls: always this value
      eq = "4711"
    }
  }

  step "refund_customer" {
    tool      = "refund_customer" # called 4 times
    max_calls = 5                 # at most 3 calls in one run, plus a margin of 50%
    arg "amount" {                # learned from 4 calls: 4 distinct numbers from 5 to 30
      min = 5
      max = 30
    }
    arg "currency" { # learned from 4 calls: always this value
      eq = "EUR"
    }
    arg "note" { # learned from 2 calls, absent in 2: these 2 values only
      enum     = ["a", "bb"]
      optional = true # absent in some calls
    }
    arg "order_id" { # learned from 4 calls: always this value
      eq = "4711"
    }
  }

  step "send_email" {
    tool      = "send_email" # called 6 times
    max_calls = 9            # at most 6 calls in one run, plus a margin of 50%
    arg "body" {             # learned from 6 calls: 6 distinct strings, the longest 16 characters
      max_length = 16
    }
    arg "to" { # learned from 6 calls: always this value
      eq = "c@example.com"
    }
  }
}
