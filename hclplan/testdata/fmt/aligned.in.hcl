plan "a" {
  goal = "alignment runs are broken by blank lines and blocks"
  expires = "2027-01-01T00:00:00Z"

  order = "sequential"
  on_violation = "hold"
  step "s" {
    tool = "t"
    max_calls = 3
    on_error = "hold"
    approval = "each"
    arg "a" {
      min = 1
      max = 30
      optional = true
    }
  }
}
