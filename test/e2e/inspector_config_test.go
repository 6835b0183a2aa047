//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestInspectorCLIThroughMCPConfig drives the MCP Inspector CLI with what
// `planlock mcp-config --client cursor` prints. stdio: the printed JSON is
// the Inspector's --config file, and the Inspector starts the proxy from it.
// HTTP: the proxy runs as the stderr line prints it, and the Inspector
// connects to the entry's url. The Inspector's config file takes an HTTP
// server only as {"type": "streamable-http"|"sse", "url": ...}, a shape no
// client of mcp-config uses (cursor's {"url": ...} it reads as stdio with an
// empty command), so over HTTP the url goes on its command line. And it
// appends its own options (--method ...) after the entry's args, where its
// CLI takes everything past a "--" for the server: an entry whose args hold
// "-- UPSTREAM" loses them, so the stdio entry is that of a plan whose
// upstream block names the server (no "--" in its args).
func TestInspectorCLIThroughMCPConfig(t *testing.T) {
	peers := peersDir(t)
	inspector := filepath.Join(peers, "node_modules/@modelcontextprotocol/inspector/cli/build/cli.js")
	command, _ := json.Marshal(everythingCmd(t))
	withUpstream := writePlan(t, strings.Replace(everythingPlan, `order = "any"`, `order = "any"
  upstream {
    command = `+string(command)+`
  }`, 1))
	const name = "guarded"

	// mcpConfig runs mcp-config --client cursor and returns the one entry
	// it prints on stdout, and its stdout and stderr.
	mcpConfig := func(t *testing.T, plan string, args ...string) (entry map[string]any, stdout, stderr string) {
		t.Helper()
		args = append([]string{"mcp-config", "--client", "cursor", "--name", name, "--plan", plan, "--insecure-skip-verify"}, args...)
		cmd := exec.Command(planlockBin, args...)
		var errb strings.Builder
		cmd.Stderr = &errb
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("planlock %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		var doc struct {
			MCPServers map[string]map[string]any `json:"mcpServers"`
		}
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatalf("mcp-config printed no JSON (%v):\n%s", err, out)
		}
		if len(doc.MCPServers) != 1 || doc.MCPServers[name] == nil {
			t.Fatalf("mcp-config printed no single entry %q:\n%s", name, out)
		}
		return doc.MCPServers[name], string(out), errb.String()
	}

	cases := []struct {
		name string
		// target sets up the server and returns the Inspector's arguments
		// that name it.
		target func(t *testing.T, dir string) []string
	}{
		{"stdio", func(t *testing.T, dir string) []string {
			entry, printed, _ := mcpConfig(t, withUpstream, "--state", filepath.Join(dir, "state"))
			if entry["command"] != planlockBin || entry["url"] != nil || slices.Contains(argsOf(entry), any("--")) {
				t.Fatalf("stdio entry %v, want planlock proxy without -- UPSTREAM", entry)
			}
			file := filepath.Join(dir, "mcp.json")
			if err := os.WriteFile(file, []byte(printed), 0o644); err != nil {
				t.Fatal(err)
			}
			return []string{"--config", file, "--server", name}
		}},
		{"http", func(t *testing.T, dir string) []string {
			addr := "127.0.0.1:" + freePort(t)
			entry, _, stderr := mcpConfig(t, writePlan(t, everythingPlan), append([]string{"--listen", addr, "--state", filepath.Join(dir, "state"), "--"}, everythingCmd(t)...)...)
			url, _ := entry["url"].(string)
			if url != "http://"+addr+"/mcp" || len(entry) != 1 {
				t.Fatalf("HTTP entry %v, want only url http://%s/mcp", entry, addr)
			}
			m := regexp.MustCompile(`(?m)^planlock: the client connects to (\S+); run the proxy there with: (.+)$`).FindStringSubmatch(stderr)
			if m == nil || m[1] != url {
				t.Fatalf("mcp-config --listen printed no proxy command for %s on stderr:\n%s", url, stderr)
			}
			// The printed command, run by a shell as the user pastes it
			// (exec: the process killed at cleanup is the proxy itself).
			served := startLogged(t, nil, `on (http://\S+/mcp)`, "sh", "-c", "exec "+m[2])
			if served != url {
				t.Fatalf("the printed proxy command serves %s, the entry says %s", served, url)
			}
			return []string{url, "--transport", "http"}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			target := tc.target(t, t.TempDir())
			run := func(args ...string) string {
				t.Helper()
				all := append(append([]string{inspector, "--cli"}, target...), args...)
				out, err := exec.Command("node", all...).CombinedOutput()
				if err != nil {
					t.Fatalf("inspector %v: %v\n%s", args, err, out)
				}
				return string(out)
			}
			out := run("--method", "tools/list")
			var list struct {
				Tools []struct{ Name string }
			}
			if err := json.Unmarshal([]byte(out), &list); err != nil {
				t.Fatalf("tools/list is not JSON (%v):\n%s", err, out)
			}
			var names []string
			for _, tl := range list.Tools {
				names = append(names, tl.Name)
			}
			slices.Sort(names)
			if strings.Join(names, ",") != "echo,get-env,get-sum" {
				t.Fatalf("tools/list shows %v, want the planned echo, get-sum, get-env", names)
			}
			type result struct {
				IsError bool
				Content []struct{ Text string }
			}
			call := func(args ...string) result {
				t.Helper()
				out := run(append([]string{"--method", "tools/call", "--tool-name", "get-sum"}, args...)...)
				var r result
				if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Content) != 1 {
					t.Fatalf("tools/call %v: not one content item (%v):\n%s", args, err, out)
				}
				return r
			}
			if r := call("--tool-arg", "a=2", "--tool-arg", "b=3"); r.IsError || r.Content[0].Text != "The sum of 2 and 3 is 5." {
				t.Fatalf("allowed call: %+v", r)
			}
			if r := call("--tool-arg", "a=2", "--tool-arg", "b=40"); !r.IsError || !strings.Contains(r.Content[0].Text, `step "sum": argument "b" = 40 is above the maximum 10`) {
				t.Fatalf("blocked call: %+v", r)
			}
		})
	}
}

// argsOf is a parsed entry's args (nil when it has none).
func argsOf(entry map[string]any) []any {
	a, _ := entry["args"].([]any)
	return a
}
