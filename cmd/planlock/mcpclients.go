package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/planlock/planlock/internal/atomicfile"
	"github.com/planlock/planlock/internal/boundedio"
	"github.com/planlock/planlock/internal/jsonedit"
)

// mcpClient is one MCP client's configuration format.
type mcpClient struct {
	name string
	// key is the top-level member holding the servers.
	key string
	// stdio and http make one server entry.
	stdio func(command string, args []string, env map[string]string) serverEntry
	http  func(url string) serverEntry
	// path is the default config file for --write ("" = none).
	path func() (string, error)
}

func homePath(parts ...string) func() (string, error) {
	return func() (string, error) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		return filepath.Join(append([]string{home}, parts...)...), nil
	}
}

func relPath(parts ...string) func() (string, error) {
	return func() (string, error) { return filepath.Join(parts...), nil }
}

// claudeDesktopPath is claude_desktop_config.json where Claude Desktop keeps it.
func claudeDesktopPath() (string, error) {
	switch runtime.GOOS {
	case "darwin":
		return homePath("Library", "Application Support", "Claude", "claude_desktop_config.json")()
	case "windows":
		if d := os.Getenv("APPDATA"); d != "" {
			return filepath.Join(d, "Claude", "claude_desktop_config.json"), nil
		}
		return "", errors.New("APPDATA is not set")
	}
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "Claude", "claude_desktop_config.json"), nil
	}
	return homePath(".config", "Claude", "claude_desktop_config.json")()
}

// serverEntry is one server in a client's configuration, its members in
// the order the clients' documentation shows them.
type serverEntry struct {
	Type      string            `json:"type,omitempty"`
	Command   string            `json:"command,omitempty"`
	Args      []string          `json:"args,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	URL       string            `json:"url,omitempty"`
	ServerURL string            `json:"serverUrl,omitempty"` // windsurf
}

func stdioEntry(typed bool) func(string, []string, map[string]string) serverEntry {
	return func(command string, args []string, env map[string]string) serverEntry {
		e := serverEntry{Command: command, Args: args, Env: env}
		if typed {
			e.Type = "stdio"
		}
		return e
	}
}

// mcpClients are the clients mcp-config knows, by --client name.
var mcpClients = map[string]mcpClient{
	"claude-desktop": {name: "claude-desktop", key: "mcpServers", stdio: stdioEntry(false), path: claudeDesktopPath},
	"claude-code": {name: "claude-code", key: "mcpServers", stdio: stdioEntry(true),
		http: func(url string) serverEntry { return serverEntry{Type: "http", URL: url} },
		path: relPath(".mcp.json")},
	"cursor": {name: "cursor", key: "mcpServers", stdio: stdioEntry(false),
		http: func(url string) serverEntry { return serverEntry{URL: url} },
		path: homePath(".cursor", "mcp.json")},
	"vscode": {name: "vscode", key: "servers", stdio: stdioEntry(true),
		http: func(url string) serverEntry { return serverEntry{Type: "http", URL: url} },
		path: relPath(".vscode", "mcp.json")},
	"windsurf": {name: "windsurf", key: "mcpServers", stdio: stdioEntry(false),
		http: func(url string) serverEntry { return serverEntry{ServerURL: url} },
		path: homePath(".codeium", "windsurf", "mcp_config.json")},
}

func clientNames() string {
	var n []string
	for k := range mcpClients {
		n = append(n, k)
	}
	sort.Strings(n)
	return strings.Join(n, ", ")
}

// inGoBuildCache reports whether path is a temporary binary of go run or go
// test, which is gone once that command ends.
func inGoBuildCache(path string) bool {
	sep := string(filepath.Separator)
	return strings.Contains(path, sep+"go-build") || strings.Contains(path, sep+"go-build"+sep)
}

// writeClientConfig merges the entry into path, keeping a .bak copy of what
// was there.
func writeClientConfig(path, key, name string, entry any) (backup string, err error) {
	old, err := boundedio.ReadFile(path, boundedio.MaxConfigBytes)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	doc, err := jsonedit.SetMember(old, key, name, entry)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	mode := fs.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	if old != nil {
		backup = path + ".bak"
		if err := os.WriteFile(backup, old, mode); err != nil {
			return "", err
		}
	}
	if err := atomicfile.Write(path, doc, mode); err != nil {
		return "", err
	}
	return backup, nil
}
