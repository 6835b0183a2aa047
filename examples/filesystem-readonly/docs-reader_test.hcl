# Tests of docs-reader.hcl: "planlock plan test examples/filesystem-readonly/".

test "reads inside /srv/docs" {
  call {
    tool   = "list_directory"
    args   = { path = "/srv/docs" }
    expect = "allow"
  }
  call {
    tool   = "read_text_file"
    args   = { path = "/srv/docs/guide/install.md", head = 50 }
    expect = "allow"
  }
  call {
    tool   = "search_files"
    args   = { path = "/srv/docs/guide", pattern = "refund" }
    expect = "allow"
  }
}

test "no climbing out" {
  call {
    tool       = "read_text_file"
    args       = { path = "/srv/docs/../etc/passwd" }
    expect     = "block"
    reason_arg = "path"
  }
  call {
    tool       = "list_directory"
    args       = { path = "/srv/docsx" }
    expect     = "block"
    reason_arg = "path"
  }
  call {
    tool        = "read_text_file"
    args        = { path = "/srv/docs/a.md", head = 2001 }
    expect      = "block"
    reason_step = "read"
    reason_arg  = "head"
  }
}

test "no writes" {
  call {
    tool            = "write_file"
    args            = { path = "/srv/docs/a.md", content = "x" }
    expect          = "block"
    reason_contains = "is not in plan"
  }
}
