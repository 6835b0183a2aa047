plan "n" {
  goal = "nested objects and lists"
  step "s" {
    tool = "t"
    arg "filter" {
      eq = { labels = ["bug", "p1"], owner = { login = "acme", id = 42 }, draft = false }
    }
    arg "list" { enum = [[1, 2], [3]] }
    pin {
      tool = "read"
      args = {
        path  = "f/x"
        depth = 2
      }
      field = "meta.hash"
      eq    = "abc"
    }
  }
}
