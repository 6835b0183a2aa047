//go:build e2e

package e2e

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// claudeBin is Claude Code from scripts/install-claude-code.
func claudeBin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(peersDir(t), "claude-code", "node_modules", ".bin", "claude")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("Claude Code is not installed (%v): run scripts/install-peers", err)
	}
	return bin
}

// TestClaudeCodeConnects feeds mcp-config --client claude-code's output, as
// printed, to the real `claude mcp add-json`, and `claude mcp list` must
// show the entry Connected: over stdio (Claude Code starts the proxy) and
// over HTTP (a proxy serving --listen).
func TestClaudeCodeConnects(t *testing.T) {
	claude := claudeBin(t)
	home, project := t.TempDir(), t.TempDir()
	env := append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"PATH="+filepath.Dir(claude)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "XDG_STATE_HOME="+filepath.Join(home, "state"))
	plan := writePlan(t, `
plan "notes" {
  goal  = "echo"
  order = "any"
  upstream {
    command = ["`+testUpstreamBin+`"]
  }
  step "say" {
    tool = "echo"
    arg "message" { max_length = 100 }
  }
}
`)
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env, cmd.Dir = env, project
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output() // stdout only: what the user pastes
		if err != nil {
			t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
		}
		return string(out)
	}
	addJSON := regexp.MustCompile(`^claude mcp add-json \S+ '[^']+'\n$`)

	// stdio: the printed line, run by a shell as the user pastes it.
	line := run(planlockBin, "mcp-config", "--client", "claude-code", "--plan", plan, "--insecure-skip-verify")
	if !addJSON.MatchString(line) {
		t.Fatalf("mcp-config printed %q, want one claude mcp add-json line", line)
	}
	run("sh", "-c", line)

	// HTTP: a proxy listening, and the HTTP form of the entry.
	proxyURL := startLogged(t, env[len(env)-1:], `on (http://\S+/mcp)`, planlockBin, "proxy", "--plan", plan,
		"--insecure-skip-verify", "--state", filepath.Join(home, "http-state"), "--listen", "127.0.0.1:0")
	u, err := url.Parse(proxyURL)
	if err != nil {
		t.Fatal(err)
	}
	line = run(planlockBin, "mcp-config", "--client", "claude-code", "--name", "notes-http", "--listen", u.Host, "--plan", plan, "--insecure-skip-verify")
	if !addJSON.MatchString(line) {
		t.Fatalf("mcp-config --listen printed %q", line)
	}
	run("sh", "-c", line)

	list := run(claude, "mcp", "list")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^notes: \S+ proxy --plan \S+ --insecure-skip-verify - ✔ Connected$`),
		regexp.MustCompile(`(?m)^notes-http: ` + regexp.QuoteMeta(proxyURL) + ` \(HTTP\) - ✔ Connected$`),
	} {
		if !want.MatchString(list) {
			t.Errorf("claude mcp list lacks %s:\n%s", want, list)
		}
	}
}
