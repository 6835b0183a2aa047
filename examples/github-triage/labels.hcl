# Label new issues of one repository with labels from a fixed set only.
# Upstream: the GitHub MCP server; its token reaches the server and nothing else.
plan "triage-labels-acme-app" {
  goal  = "Label this week's new issues in acme/app with bug, docs, question or needs-repro"
  order = "any"

  upstream {
    command = ["npx", "-y", "@modelcontextprotocol/server-github@2025.4.8"]
    env     = ["GITHUB_PERSONAL_ACCESS_TOKEN"]
  }

  step "read" {
    tool      = "get_issue"
    max_calls = 200
    arg "owner" { eq = "acme" }
    arg "repo" { eq = "app" }
    arg "issue_number" { min = 1 }
  }

  step "label" {
    tool      = "update_issue"
    max_calls = 50
    arg "owner" { eq = "acme" }
    arg "repo" { eq = "app" }
    arg "issue_number" { min = 1 }
    arg "labels" {
      min_items = 1
      max_items = 3
      items {
        enum = ["bug", "docs", "question", "needs-repro"]
      }
    }
    check {
      expr    = "args.labels.all(l, args.labels.exists_one(m, m == l))"
      message = "each label at most once"
    }
  }
}
