# Leading comment survives.
plan "c" {
  goal = "keep comments" # trailing comment
  /* block comment */
  order = "any"
  step "s" {
    tool      = "t" // slash comment
    max_calls = 2
    arg "a" { eq = "x" }
  }
}
