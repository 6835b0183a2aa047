# Suggested by planlock plan suggest from audit.jsonl: 6 forwarded calls in 1 run.
# Every line says what it was learned from. Review each one: this plan allows
# what the agent did, no more; approve only what it should do.
plan "docs" {
  goal  = "Replace with what this agent is for (learned from observed calls)"
  order = "sequential" # every run called the tools in this order, each in one stretch

  step "read" {
    tool      = "read" # called 6 times
    max_calls = 6      # at most 6 calls in one run
    arg "path" {       # learned from 6 calls: 6 distinct strings, the longest 20 characters; pattern from the given hint
      max_length = 20
      pattern    = "/srv/docs(/[^./][^/]*)+" # from the given hint, matched by every observed value
    }
  }
}
