# Tests of triage.hcl: "planlock plan test examples/github-triage/".

test "triage one issue" {
  call {
    tool   = "list_issues"
    args   = { owner = "acme", repo = "app", state = "open" }
    expect = "allow"
  }
  call {
    tool   = "get_issue"
    args   = { owner = "acme", repo = "app", issue_number = 12 }
    expect = "allow"
  }
  call {
    tool   = "update_issue"
    args   = { owner = "acme", repo = "app", issue_number = 12, labels = ["bug"] }
    expect = "allow"
  }
  call {
    tool   = "add_issue_comment"
    args   = { owner = "acme", repo = "app", issue_number = 12, body = "Thanks, labelled as a bug." }
    expect = "allow"
  }
}

test "another repository is blocked" {
  call {
    tool       = "get_issue"
    args       = { owner = "acme", repo = "billing", issue_number = 12 }
    expect     = "block"
    reason_arg = "repo"
  }
  call {
    tool       = "list_issues"
    args       = { owner = "acme", repo = "app", state = "closed" }
    expect     = "block"
    reason_arg = "state"
  }
}

test "closing issues is not planned" {
  call {
    tool   = "close_issue"
    args   = { owner = "acme", repo = "app", issue_number = 12 }
    expect = "block"
  }
}
