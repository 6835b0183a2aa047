# An editing agent confined to one directory tree: it may read several files
# at once and make small, bounded edits, nothing else. Every path must stay
# under /srv/docs; an edit replaces at most 1000 characters with at most 1000.
plan "edit-docs" {
  goal  = "Fix typos in the product documentation under /srv/docs"
  order = "any"

  upstream {
    command = ["npx", "-y", "@modelcontextprotocol/server-filesystem@2026.8.31", "/srv/docs"]
  }

  step "read" {
    tool      = "read_multiple_files"
    max_calls = 20
    arg "paths" {
      min_items = 1
      max_items = 10
      items {
        pattern    = "/srv/docs(/[^./][^/]*)+"
        max_length = 300
      }
      expr    = "self.all(p, !p.contains('..'))"
      message = "paths must stay inside /srv/docs"
    }
  }

  step "edit" {
    tool      = "edit_file"
    max_calls = 10
    arg "path" { pattern = "/srv/docs(/[^./][^/]*)+\\.md" }
    arg "edits" {
      min_items = 1
      max_items = 5
      items {
        field "oldText" { max_length = 1000 }
        field "newText" { max_length = 1000 }
      }
    }
    arg "dryRun" {
      enum     = [true, false]
      optional = true
    }
    check {
      expr    = "args.edits.all(e, e.oldText != e.newText)"
      message = "every edit must change something"
    }
  }
}
