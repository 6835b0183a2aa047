# A research agent that may read one directory tree and nothing else: no
# writes, no moves, no paths outside /srv/docs (".." segments are refused by
# the pattern, so a path cannot climb out).
plan "read-docs" {
  goal  = "Answer questions from the product documentation under /srv/docs, read only"
  order = "any"

  upstream {
    command = ["npx", "-y", "@modelcontextprotocol/server-filesystem@2026.8.31", "/srv/docs"]
  }

  step "list" {
    tool      = "list_directory"
    max_calls = 100
    arg "path" { pattern = "/srv/docs(/[^./][^/]*)*" }
  }

  step "read" {
    tool      = "read_text_file"
    max_calls = 500
    arg "path" { pattern = "/srv/docs(/[^./][^/]*)+" }
    arg "head" {
      min      = 1
      max      = 2000
      optional = true
    }
  }

  step "search" {
    tool      = "search_files"
    max_calls = 50
    arg "path" { pattern = "/srv/docs(/[^./][^/]*)*" }
    arg "pattern" { max_length = 200 }
  }
}
