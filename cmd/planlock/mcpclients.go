package main

import (
	"bytes"
	"encoding/json"
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

// marshalEntry renders v as the file shows it: two-space indents, at the
// indentation of where it goes, no HTML escaping.
func marshalEntry(v any, prefix string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent(prefix, "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// inGoBuildCache reports whether path is a temporary binary of go run or go
// test, which is gone once that command ends.
func inGoBuildCache(path string) bool {
	sep := string(filepath.Separator)
	return strings.Contains(path, sep+"go-build") || strings.Contains(path, sep+"go-build"+sep)
}

// mergeServer sets servers[name] = entry in the JSON document doc, changing
// only those bytes: every other member, its formatting and order stay as
// they were. An empty doc becomes a new document.
func mergeServer(doc []byte, key, name string, entry any) ([]byte, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		out, err := marshalEntry(map[string]any{key: map[string]any{name: entry}}, "")
		return append(out, '\n'), err
	}
	if !json.Valid(doc) {
		return nil, errors.New("it is not plain JSON (comments or a syntax error); add the entry by hand")
	}
	top := skipSpace(doc, 0)
	if doc[top] != '{' {
		return nil, errors.New("its top level is not a JSON object")
	}
	members := objectMembers(doc, top)
	indent := memberIndent(doc, members, top, "  ")
	for _, m := range members {
		if m.key != key {
			continue
		}
		if doc[m.valStart] != '{' {
			return nil, fmt.Errorf("its %q is not a JSON object", key)
		}
		inner := objectMembers(doc, m.valStart)
		innerIndent := memberIndent(doc, inner, m.valStart, indent+"  ")
		for _, s := range inner {
			if s.key == name { // replace the value only
				v, err := marshalEntry(entry, lineIndent(doc, s.keyStart))
				if err != nil {
					return nil, err
				}
				return splice(doc, s.valStart, s.valEnd, v), nil
			}
		}
		return insertMember(doc, m.valStart, inner, innerIndent, name, entry)
	}
	return insertMember(doc, top, members, indent, key, map[string]any{name: entry})
}

func splice(doc []byte, start, end int, with []byte) []byte {
	out := make([]byte, 0, len(doc)-(end-start)+len(with))
	out = append(out, doc[:start]...)
	out = append(out, with...)
	return append(out, doc[end:]...)
}

// insertMember adds "name": value as the last member of the object at obj.
func insertMember(doc []byte, obj int, members []member, indent, name string, value any) ([]byte, error) {
	v, err := marshalEntry(value, indent)
	if err != nil {
		return nil, err
	}
	k, _ := json.Marshal(name)
	if len(members) > 0 {
		last := members[len(members)-1]
		return splice(doc, last.valEnd, last.valEnd, []byte(",\n"+indent+string(k)+": "+string(v))), nil
	}
	// An empty object: write it anew between its braces.
	end := scanValue(doc, obj)
	closing := lineIndent(doc, obj)
	return splice(doc, obj, end, []byte("{\n"+indent+string(k)+": "+string(v)+"\n"+closing+"}")), nil
}

// member is one member of a JSON object, as byte offsets into the document.
type member struct {
	key              string
	keyStart         int
	valStart, valEnd int
}

// objectMembers lists the members of the valid JSON object starting at i.
func objectMembers(doc []byte, i int) []member {
	var out []member
	i++ // '{'
	for {
		i = skipSpace(doc, i)
		if doc[i] == '}' {
			return out
		}
		if doc[i] == ',' {
			i = skipSpace(doc, i+1)
		}
		ks := i
		ke := scanValue(doc, i)
		var k string
		_ = json.Unmarshal(doc[ks:ke], &k)
		i = skipSpace(doc, ke)
		i = skipSpace(doc, i+1) // ':'
		ve := scanValue(doc, i)
		out = append(out, member{key: k, keyStart: ks, valStart: i, valEnd: ve})
		i = ve
	}
}

func skipSpace(doc []byte, i int) int {
	for i < len(doc) && (doc[i] == ' ' || doc[i] == '\t' || doc[i] == '\n' || doc[i] == '\r') {
		i++
	}
	return i
}

// scanValue returns the end of the valid JSON value starting at i.
func scanValue(doc []byte, i int) int {
	switch doc[i] {
	case '"':
		for j := i + 1; j < len(doc); j++ {
			switch doc[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
		return len(doc)
	case '{', '[':
		depth := 0
		for j := i; j < len(doc); j++ {
			switch doc[j] {
			case '"':
				j = scanValue(doc, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(doc)
	}
	j := i
	for j < len(doc) && !strings.ContainsRune(" \t\r\n,}]", rune(doc[j])) {
		j++
	}
	return j
}

// lineIndent is the whitespace that starts the line holding offset i.
func lineIndent(doc []byte, i int) string {
	start := bytes.LastIndexByte(doc[:i], '\n') + 1
	j := start
	for j < i && (doc[j] == ' ' || doc[j] == '\t') {
		j++
	}
	return string(doc[start:j])
}

// memberIndent is the indentation of an object's members: that of its
// first member, else the object's own plus def's step.
func memberIndent(doc []byte, members []member, obj int, def string) string {
	if len(members) > 0 {
		if in := lineIndent(doc, members[0].keyStart); bytes.LastIndexByte(doc[:members[0].keyStart], '\n') > obj {
			return in
		}
	}
	if obj == skipSpace(doc, 0) {
		return "  "
	}
	return lineIndent(doc, obj) + "  "
}

// writeClientConfig merges the entry into path, keeping a .bak copy of what
// was there.
func writeClientConfig(path, key, name string, entry any) (backup string, err error) {
	old, err := boundedio.ReadFile(path, boundedio.MaxConfigBytes)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	doc, err := mergeServer(old, key, name, entry)
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
