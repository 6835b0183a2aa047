package planrun

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/proxy/planload"
)

// TestUpstream: exactly one source gives the upstream; a relative program
// of the plan is taken from the plan file's directory.
func TestUpstream(t *testing.T) {
	withBlock := func(block string) *planload.Loaded {
		src := `plan "p" {
  goal = "g"
` + block + `
  step "s" {
    tool = "t"
  }
}
`
		p, diags := hclplan.Parse("p.hcl", []byte(src))
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		return &planload.Loaded{Plan: p, File: "/plans/p.hcl"}
	}
	stdio := withBlock(`upstream {
    command = ["./server", "--flag"]
    env     = ["TOKEN"]
  }`)
	none := withBlock("")
	lookup := func(n string) (string, bool) { return "v-" + n, n == "TOKEN" || n == "EXTRA" }
	for _, tc := range []struct {
		name    string
		loaded  *planload.Loaded
		given   UpstreamGiven
		command []string
		url     string
		env     string // a variable passed, "" for none to check
		usage   string
	}{
		{name: "the plan's stdio upstream", loaded: stdio, command: []string{"/plans/server", "--flag"}, env: "TOKEN=v-TOKEN"},
		{name: "the command line's", loaded: none, given: UpstreamGiven{Command: []string{"srv"}, Env: []string{"EXTRA"}}, command: []string{"srv"}, env: "EXTRA=v-EXTRA"},
		{name: "a URL", loaded: none, given: UpstreamGiven{URL: "http://127.0.0.1:1/mcp"}, url: "http://127.0.0.1:1/mcp"},
		{name: "none", loaded: none, usage: "no upstream: give -- COMMAND ARGS..."},
		{name: "twice", loaded: stdio, given: UpstreamGiven{URL: "http://x/mcp"}, usage: "the upstream is given more than once"},
		{name: "env with a URL", loaded: none, given: UpstreamGiven{URL: "http://x/mcp", Env: []string{"EXTRA"}}, usage: "--env applies to a stdio upstream only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, err := Upstream(tc.loaded, tc.given, lookup)
			if tc.usage != "" {
				if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.usage) {
					t.Fatalf("err %v, want a usage error %q", err, tc.usage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(up.Command, tc.command) || up.URL != tc.url {
				t.Errorf("upstream %q %q, want %q %q", up.Command, up.URL, tc.command, tc.url)
			}
			if tc.env != "" && !slices.Contains(up.Env, tc.env) {
				t.Errorf("env %q lacks %s", up.Env, tc.env)
			}
		})
	}
}
