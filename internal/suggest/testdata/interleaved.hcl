# Suggested by planlock plan suggest from audit.jsonl: 5 forwarded calls in 1 run.
# Every line says what it was learned from. Review each one: this plan allows
# what the agent did, no more; approve only what it should do.
plan "browse" {
  goal  = "Replace with what this agent is for (learned from observed calls)"
  order = "any" # the runs called the tools in differing or interleaved orders

  step "list" {
    tool      = "list" # called 2 times
    max_calls = 2      # at most 2 calls in one run
    arg "page" {       # learned from 2 calls: 2 distinct numbers from 1 to 2
      min = 1
      max = 2
    }
  }

  step "read" {
    tool      = "read" # called 3 times
    max_calls = 3      # at most 3 calls in one run
    arg "flag" {       # learned from 2 calls, absent in 1: these 2 values only
      enum     = [true, false]
      optional = true # absent in some calls
    }
    arg "id" { # learned from 3 calls: these 3 values only
      enum = ["a", "b", "c"]
    }
  }
}
