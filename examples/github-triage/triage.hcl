# Triage new issues of one repository: read them, label them, comment once.
# Upstream: the GitHub MCP server; its token reaches the server and nothing else.
plan "triage-acme-app" {
  goal  = "Label and answer this week's new issues in acme/app, nowhere else"
  order = "any"

  upstream {
    command = ["npx", "-y", "@modelcontextprotocol/server-github@2025.4.8"]
    env     = ["GITHUB_PERSONAL_ACCESS_TOKEN"]
  }

  step "list" {
    tool      = "list_issues"
    max_calls = 20
    arg "owner" { eq = "acme" }
    arg "repo" { eq = "app" }
    arg "state" {
      enum     = ["open"]
      optional = true
    }
    arg "page" {
      min      = 1
      max      = 10
      optional = true
    }
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
      max_length = 3
    }
  }

  step "comment" {
    tool      = "add_issue_comment"
    max_calls = 50
    arg "owner" { eq = "acme" }
    arg "repo" { eq = "app" }
    arg "issue_number" { min = 1 }
    arg "body" { max_length = 4000 }
  }
}
