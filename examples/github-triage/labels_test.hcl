# Tests of labels.hcl: "planlock plan test examples/github-triage/".

test "label an issue from the fixed set" {
  call {
    tool   = "get_issue"
    args   = { owner = "acme", repo = "app", issue_number = 12 }
    expect = "allow"
  }
  call {
    tool   = "update_issue"
    args   = { owner = "acme", repo = "app", issue_number = 12, labels = ["bug", "needs-repro"] }
    expect = "allow"
  }
}

test "labels outside the set, repeated or too many are blocked" {
  call {
    tool       = "update_issue"
    args       = { owner = "acme", repo = "app", issue_number = 12, labels = ["wontfix"] }
    expect     = "block"
    reason_arg = "labels"
  }
  call {
    tool            = "update_issue"
    args            = { owner = "acme", repo = "app", issue_number = 12, labels = ["bug", "bug"] }
    expect          = "block"
    reason_contains = "each label at most once"
  }
  call {
    tool       = "update_issue"
    args       = { owner = "acme", repo = "app", issue_number = 12, labels = ["bug", "docs", "question", "needs-repro"] }
    expect     = "block"
    reason_arg = "labels"
  }
  call {
    tool       = "update_issue"
    args       = { owner = "acme", repo = "billing", issue_number = 12, labels = ["bug"] }
    expect     = "block"
    reason_arg = "repo"
  }
}
