# Suggested by planlock plan suggest from audit?.jsonl: 10 forwarded calls in 1 run.
# Every line says what it was learned from. Review each one: this plan allows
# what the agent did, no more; approve only what it should do.
plan "hostile" {
  goal  = "goal with \"quotes\" and $${interpolation}\nand a newline"
  order = "any" # the runs called the tools in differing or interleaved orders

  step "refund_customer" {
    tool      = "refund_customer" # called 2 times
    max_calls = 2                 # at most 2 calls in one run
    arg "amount" {                # learned from 2 calls: always this value
      eq = 123456789012345678901234567890
    }
    arg "note" { # learned from 2 calls: always this value
      eq = "line one\nline two\r\n\"quoted\" \\ back $${var} %%{ if x } */ # not a comment"
    }
  }

  # NOTE: the tool name has characters other than ASCII letters, digits, '_', '-', '.': U+03BF at byte 11; check it is the tool you mean
  step "refund_cust_mer" {
    tool      = "refund_custοmer" # called 1 time
    max_calls = 1                 # at most 1 call in one run
    arg "amount" {                # learned from 1 call: always this value
      eq = -0.000001
    }
    arg "note" { # learned from 1 call: always this value
      eq = "look-alike tool (Greek omicron)"
    }
  }

  # NOTE: the tool name has characters other than ASCII letters, digits, '_', '-', '.': U+0020 at byte 6, U+000A at byte 15, U+007D at byte 16, U+000A at byte 17, U+0020 at byte 22, U+0022 at byte 23, U+0022 at byte 28, U+0020 at byte 29; check it is the tool you mean
  step "refund_customer___step__evil___" {
    tool      = "refund customer\n}\nstep \"evil\" {" # called 1 time
    max_calls = 1                                     # at most 1 call in one run
    arg "odd key\n\"x\"" {                            # learned from 1 call: always this value
      eq = {
        nested = [1, "$${x}", null, {
          k = "v"
        }]
      }
    }
  }

  step "huge" {
    tool      = "huge" # called 6 times
    max_calls = 6      # at most 6 calls in one run
    arg "blob" {       # learned from 6 calls: 6 distinct strings, the longest 100000 characters
      max_length = 100000
    }
    arg "n" { # learned from 6 calls: 6 distinct numbers from 1 to 6
      min = 1
      max = 6
    }
  }
}
