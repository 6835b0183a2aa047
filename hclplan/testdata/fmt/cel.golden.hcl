plan "edit-docs" {
  goal = "Fix typos under /srv/docs"
  step "edit" {
    tool = "edit_file"
    arg "path" { pattern = "/srv/docs/.+" }
    arg "edits" {
      max_items = 5
      items {
        field "oldText" {
          max_length = 1000
          expr       = "!self.contains('..')  &&  self != \"\""
        }
        field "newText" { max_length = 1000 }
      }
    }
    check {
      expr    = <<-EOT
      args.edits.all(e,
        e.oldText != e.newText)
  EOT
      message = "every edit must change something"
    }
  }
}
