# Tests of edit-docs.hcl: "planlock plan test examples/filesystem/".

test "read and fix a typo" {
  call {
    tool   = "read_multiple_files"
    args   = { paths = ["/srv/docs/intro.md", "/srv/docs/guide/setup.md"] }
    expect = "allow"
  }
  call {
    tool   = "edit_file"
    args   = { path = "/srv/docs/intro.md", edits = [{ oldText = "teh", newText = "the" }], dryRun = true }
    expect = "allow"
  }
}

test "paths stay inside the documents" {
  call {
    tool       = "read_multiple_files"
    args       = { paths = ["/srv/docs/intro.md", "/srv/docs/../etc/passwd"] }
    expect     = "block"
    reason_arg = "paths"
  }
  call {
    tool       = "read_multiple_files"
    args       = { paths = ["/etc/passwd"] }
    expect     = "block"
    reason_arg = "paths"
  }
  call {
    tool       = "edit_file"
    args       = { path = "/srv/docs/intro.txt", edits = [{ oldText = "a", newText = "b" }] }
    expect     = "block"
    reason_arg = "path"
  }
}

test "edits are bounded" {
  call {
    tool            = "edit_file"
    args            = { path = "/srv/docs/intro.md", edits = [{ oldText = "a", newText = "b", replaceAll = true }] }
    expect          = "block"
    reason_contains = "replaceAll"
  }
  call {
    tool            = "edit_file"
    args            = { path = "/srv/docs/intro.md", edits = [{ oldText = "same", newText = "same" }] }
    expect          = "block"
    reason_contains = "every edit must change something"
  }
  call {
    tool   = "write_file"
    args   = { path = "/srv/docs/new.md", content = "x" }
    expect = "block"
  }
}
