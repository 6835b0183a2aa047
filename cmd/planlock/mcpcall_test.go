package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// testCommands are the programs the scripts run besides planlock: an MCP
// upstream and a raw stdio MCP client.
func testCommands() map[string]func() {
	return map[string]func(){
		"testupstream": func() { os.Exit(testUpstreamMain()) },
		"mcpcall":      func() { os.Exit(mcpcall(os.Args[1:])) },
	}
}

// mcpcall is a raw stdio MCP client: it starts the server command, sends
// initialize and one tools/call, and prints the call's result:
//
//	mcpcall TOOL ARGS_JSON -- SERVER_COMMAND ARGS...
//
// It prints "error: <text>" for a tool error (isError), "ok: <text>"
// otherwise, and "rpc error: <message>" when initialize or the call fails.
func mcpcall(args []string) int {
	sep := -1
	for i, a := range args {
		if a == "--" {
			sep = i
			break
		}
	}
	if sep != 2 || len(args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: mcpcall TOOL ARGS_JSON -- COMMAND ARGS...")
		return 2
	}
	cmd := exec.Command(args[3], args[4:]...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	r := bufio.NewReader(stdout)
	send := func(v string) { _, _ = io.WriteString(stdin, v+"\n") }
	// read returns the response with the id, skipping notifications.
	read := func(id int) (map[string]json.RawMessage, error) {
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return nil, fmt.Errorf("the server closed the connection: %w", err)
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(line, &m); err != nil {
				return nil, fmt.Errorf("not JSON-RPC: %q", line)
			}
			if string(m["id"]) == fmt.Sprint(id) {
				return m, nil
			}
		}
	}
	rpcError := func(m map[string]json.RawMessage) bool {
		if e, ok := m["error"]; ok {
			var ee struct{ Message string }
			_ = json.Unmarshal(e, &ee)
			fmt.Printf("rpc error: %s\n", ee.Message)
			return true
		}
		return false
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"mcpcall","version":"1"}}}`)
	m, err := read(1)
	if err != nil {
		fmt.Printf("closed: %v\n", err)
		return 0
	}
	if rpcError(m) {
		return 0
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, args[0], args[1]))
	if m, err = read(2); err != nil {
		fmt.Printf("closed: %v\n", err)
		return 0
	}
	if rpcError(m) {
		return 0
	}
	var res struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(m["result"], &res); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var texts []string
	for _, c := range res.Content {
		texts = append(texts, c.Text)
	}
	kind := "ok"
	if res.IsError {
		kind = "error"
	}
	fmt.Printf("%s: %s\n", kind, strings.Join(texts, " "))
	return 0
}
