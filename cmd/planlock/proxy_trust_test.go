package main

import (
	"testing"

	"github.com/planlock/planlock/hclplan"
)

// A reloaded plan must name the upstream the proxy is running.
func TestSameUpstream(t *testing.T) {
	node := &hclplan.Upstream{Command: []string{"node", "server.js"}, Env: []string{"API_KEY"}}
	cases := []struct {
		name string
		a, b *hclplan.Upstream
		want bool
	}{
		{"both from the command line", nil, nil, true},
		{"same block", node, &hclplan.Upstream{Command: []string{"node", "server.js"}, Env: []string{"API_KEY"}}, true},
		{"block added", nil, node, false},
		{"block removed", node, nil, false},
		{"other arguments", node, &hclplan.Upstream{Command: []string{"node", "evil.js"}, Env: []string{"API_KEY"}}, false},
		{"more environment", node, &hclplan.Upstream{Command: []string{"node", "server.js"}, Env: []string{"API_KEY", "AWS_SECRET_ACCESS_KEY"}}, false},
		{"URL instead", node, &hclplan.Upstream{URL: "http://127.0.0.1:3000/mcp"}, false},
	}
	for _, c := range cases {
		if got := sameUpstream(c.a, c.b); got != c.want {
			t.Errorf("%s: sameUpstream = %v, want %v", c.name, got, c.want)
		}
	}
}
