# Tests of everything.hcl: "planlock plan test examples/everything/". The plan
# gates resources and prompts only: no tool may be called.

test "no tool may be called" {
  call {
    tool   = "echo"
    args   = { message = "hi" }
    expect = "block"
  }
  call {
    tool   = "get-sum"
    args   = { a = 1, b = 2 }
    expect = "block"
  }
}
