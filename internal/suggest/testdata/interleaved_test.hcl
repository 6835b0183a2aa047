# Tests suggested by planlock plan suggest: the observed calls are allowed,
# calls just outside each learned bound are blocked. Run: planlock plan test.

test "observed run 1 is allowed" {
  call {
    tool = "list"
    args = {
      page = 1
    }
    expect = "allow"
  }
  call {
    tool = "read"
    args = {
      id = "a"
    }
    expect = "allow"
  }
  call {
    tool = "list"
    args = {
      page = 2
    }
    expect = "allow"
  }
  call {
    tool = "read"
    args = {
      flag = true
      id   = "b"
    }
    expect = "allow"
  }
  call {
    tool = "read"
    args = {
      flag = false
      id   = "c"
    }
    expect = "allow"
  }
}

test "step list: argument page above the observed maximum is blocked" {
  call {
    tool = "list"
    args = {
      page = 4
    }
    expect     = "block"
    reason_arg = "page"
  }
}

test "step list: argument page below the observed minimum is blocked" {
  call {
    tool = "list"
    args = {
      page = 0
    }
    expect     = "block"
    reason_arg = "page"
  }
}

test "step list: an argument never observed is blocked" {
  call {
    tool = "list"
    args = {
      page               = 1
      unplanned_argument = "x"
    }
    expect     = "block"
    reason_arg = "unplanned_argument"
  }
}

test "step list: call 3 is over max_calls" {
  call {
    tool = "list"
    args = {
      page = 1
    }
    expect = "allow"
  }
  call {
    tool = "list"
    args = {
      page = 1
    }
    expect = "allow"
  }
  call {
    tool = "list"
    args = {
      page = 1
    }
    expect          = "block"
    reason_contains = "max_calls"
  }
}

test "step read: argument flag outside the observed values is blocked" {
  call {
    tool = "read"
    args = {
      flag = "x"
      id   = "a"
    }
    expect     = "block"
    reason_arg = "flag"
  }
}

test "step read: argument id outside the observed values is blocked" {
  call {
    tool = "read"
    args = {
      id = "ax"
    }
    expect     = "block"
    reason_arg = "id"
  }
}

test "step read: an argument never observed is blocked" {
  call {
    tool = "read"
    args = {
      id                 = "a"
      unplanned_argument = "x"
    }
    expect     = "block"
    reason_arg = "unplanned_argument"
  }
}

test "step read: call 4 is over max_calls" {
  call {
    tool = "read"
    args = {
      id = "a"
    }
    expect = "allow"
  }
  call {
    tool = "read"
    args = {
      id = "a"
    }
    expect = "allow"
  }
  call {
    tool = "read"
    args = {
      id = "a"
    }
    expect = "allow"
  }
  call {
    tool = "read"
    args = {
      id = "a"
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
