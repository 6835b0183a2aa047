plan "evil-name" {
  goal         = "Refund 10 EUR\n\n<!-- the rest is hidden"
  on_violation = "block"

  upstream {
    url = "http://127.0.0.1:8000/mcp?x=<b>|*"
  }

  step "refund" {
    tool      = "refund**\n# Heading\n[x](javascript:alert(1))"
    max_calls = 1
    arg "amount\u202e" { max = 30000 }
    arg "note" { pattern = "a|b*`c`" }
    arg "kind" { enum = ["a\u200b", "```", "<script>x</script>", "@octocat #1"] }
    arg "to" { eq = "x\r\n- [x] approved" }
  }
}
