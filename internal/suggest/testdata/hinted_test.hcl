# Tests suggested by planlock plan suggest: the observed calls are allowed,
# calls just outside each learned bound are blocked. Run: planlock plan test.

test "observed run 1 is allowed" {
  call {
    tool = "read"
    args = {
      path = "/srv/docs/a.md"
    }
    expect = "allow"
  }
  call {
    tool = "read"
    args = {
      path = "/srv/docs/b.md"
    }
    expect = "allow"
  }
  call {
    tool = "read"
    args = {
      path = "/srv/docs/c.md"
    }
    expect = "allow"
  }
  call {
    tool = "read"
    args = {
      path = "/srv/docs/d.md"
    }
    expect = "allow"
  }
  call {
    tool = "read"
    args = {
      path = "/srv/docs/e.md"
    }
    expect = "allow"
  }
  call {
    tool = "read"
    args = {
      path = "/srv/docs/guide/f.md"
    }
    expect = "allow"
  }
}

test "step read: argument path longer than observed is blocked" {
  call {
    tool = "read"
    args = {
      path = "xxxxxxxxxxxxxxxxxxxxx"
    }
    expect     = "block"
    reason_arg = "path"
  }
}

test "step read: an argument never observed is blocked" {
  call {
    tool = "read"
    args = {
      path               = "/srv/docs/a.md"
      unplanned_argument = "x"
    }
    expect     = "block"
    reason_arg = "unplanned_argument"
  }
}

test "step read: call 7 is over max_calls" {
  call {
    tool = "read"
    args = {
      path = "/srv/docs/a.md"
    }
    expect = "allow"
  }
  call {
    tool = "read"
    args = {
      path = "/srv/docs/a.md"
    }
    expect = "allow"
  }
  call {
    tool = "read"
    args = {
      path = "/srv/docs/a.md"
    }
    expect = "allow"
  }
  call {
    tool = "read"
    args = {
      path = "/srv/docs/a.md"
    }
    expect = "allow"
  }
  call {
    tool = "read"
    args = {
      path = "/srv/docs/a.md"
    }
    expect = "allow"
  }
  call {
    tool = "read"
    args = {
      path = "/srv/docs/a.md"
    }
    expect = "allow"
  }
  call {
    tool = "read"
    args = {
      path = "/srv/docs/a.md"
    }
    expect          = "block"
    reason_contains = "max_calls"
  }
}

test "a tool never observed is blocked" {
  call {
    tool            = "unplanned_tool"
    args            = {}
    expect          = "block"
    reason_contains = "is not in plan"
  }
}
