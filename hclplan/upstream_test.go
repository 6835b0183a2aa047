package hclplan

import (
	"slices"
	"testing"
)

func TestUpstreamCommandIn(t *testing.T) {
	for _, c := range []struct {
		cmd  []string
		dir  string
		want []string
	}{
		{[]string{"./refund-server", "--x"}, "/plans", []string{"/plans/refund-server", "--x"}},
		{[]string{"bin/server"}, "/plans/a", []string{"/plans/a/bin/server"}},
		{[]string{"../tools/server"}, "/plans/a", []string{"/plans/tools/server"}},
		{[]string{"npx", "-y", "./pkg"}, "/plans", []string{"npx", "-y", "./pkg"}}, // only the program
		{[]string{"node"}, "/plans", []string{"node"}},                             // PATH
		{[]string{"/usr/bin/server"}, "/plans", []string{"/usr/bin/server"}},
		{[]string{"./server"}, "", []string{"./server"}}, // no directory known
		{nil, "/plans", nil},
	} {
		u := &Upstream{Command: c.cmd}
		got := u.CommandIn(c.dir)
		if !slices.Equal(got, c.want) {
			t.Errorf("%q in %q: %q, want %q", c.cmd, c.dir, got, c.want)
		}
		if len(c.cmd) > 0 && &got[0] == &u.Command[0] {
			t.Errorf("%q: CommandIn returned the plan's own slice", c.cmd)
		}
	}
	if (*Upstream)(nil).CommandIn("/plans") != nil {
		t.Error("a plan without an upstream block has no command")
	}
}
