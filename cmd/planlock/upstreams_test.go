package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/planlock/planlock/internal/mcpserve"
	"github.com/planlock/planlock/internal/testkit/testupstream"
)

// testUpstreamMain is the "testupstream" command of the scripts: the test
// MCP upstream over stdio, in the mode named by TESTUPSTREAM_MODE.
func testUpstreamMain() int {
	mode, err := testupstream.ParseMode(os.Getenv("TESTUPSTREAM_MODE"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "testupstream: %v\n", err)
		return 2
	}
	// --calls-log FILE appends every tools/call to FILE; --mode and
	// --tools-file are as for testupstream; any other argument is ignored,
	// so scripts can check what reaches the upstream's command line.
	arg := func(name string) string {
		var val string
		for i, a := range os.Args[1:] {
			if v, ok := strings.CutPrefix(a, name+"="); ok {
				val = v
			} else if a == name && i+2 < len(os.Args) {
				val = os.Args[i+2]
			}
		}
		return val
	}
	if m := arg("--mode"); m != "" {
		if mode, err = testupstream.ParseMode(m); err != nil {
			fmt.Fprintf(os.Stderr, "testupstream: %v\n", err)
			return 2
		}
	}
	cfg := testupstream.Config{Mode: mode, CallsLog: arg("--calls-log"), ToolsFile: arg("--tools-file")}
	if err := testupstream.Run(context.Background(), cfg, os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "testupstream: %v\n", err)
		return 1
	}
	return 0
}

// filesystemPackage is the npm package the README's examples run with npx.
const filesystemPackage = "@modelcontextprotocol/server-filesystem"

// npxMain is the "npx" of the scripts, so that the documentation's commands
// run offline: "npx [-y] @modelcontextprotocol/server-filesystem DIR..."
// serves a stand-in with the real server's read_text_file (head, tail),
// list_directory, get_file_info and write_file tools, limited to DIR (which must
// exist, as for the real one). Any other package is refused with a message
// naming it.
func npxMain(args []string) int {
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		args = args[1:]
	}
	// A pinned version (the examples' PACKAGE@VERSION) is the same stand-in.
	if len(args) > 0 {
		if name, _, ok := strings.Cut(strings.TrimPrefix(args[0], "@"), "@"); ok {
			args[0] = "@" + name
		}
	}
	if len(args) == 0 || args[0] != filesystemPackage {
		fmt.Fprintf(os.Stderr, "npx (test stand-in): only %s is available offline, not %q\n", filesystemPackage, args)
		return 1
	}
	dirs := args[1:]
	if len(dirs) == 0 {
		fmt.Fprintln(os.Stderr, "Usage: mcp-server-filesystem <allowed-directory> [additional-directories...]")
		return 1
	}
	for i, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			fmt.Fprintf(os.Stderr, "Error accessing directory %s: %v\n", d, err)
			return 1
		}
		if st, err := os.Stat(abs); err != nil || !st.IsDir() {
			fmt.Fprintf(os.Stderr, "Error accessing directory %s: not a directory\n", d)
			return 1
		}
		dirs[i] = abs
	}
	inside := func(p string) (string, error) {
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", err
		}
		for _, d := range dirs {
			if abs == d || strings.HasPrefix(abs, d+string(filepath.Separator)) {
				return abs, nil
			}
		}
		return "", fmt.Errorf("access denied - path outside allowed directories: %s", p)
	}
	s := server.NewMCPServer("secure-filesystem-server", "0.0.0-stand-in", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("read_text_file", mcp.WithDescription("Read the complete contents of a file as text."),
		mcp.WithString("path", mcp.Required()),
		mcp.WithNumber("head", mcp.Description("If provided, returns only the first N lines of the file")),
		mcp.WithNumber("tail", mcp.Description("If provided, returns only the last N lines of the file"))), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		p, err := inside(req.GetString("path", ""))
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		lines := strings.SplitAfter(string(b), "\n")
		if n := req.GetInt("head", 0); n > 0 && n < len(lines) {
			lines = lines[:n]
		}
		if n := req.GetInt("tail", 0); n > 0 && n < len(lines) {
			lines = lines[len(lines)-n:]
		}
		return mcp.NewToolResultText(strings.Join(lines, "")), nil
	})
	s.AddTool(mcp.NewTool("get_file_info", mcp.WithDescription("Retrieve detailed metadata about a file or directory."),
		mcp.WithString("path", mcp.Required())), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		p, err := inside(req.GetString("path", ""))
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		st, err := os.Stat(p)
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		return mcp.NewToolResultText(fmt.Sprintf("size: %d\nmodified: %s\nisDirectory: %t\nisFile: %t\npermissions: %o",
			st.Size(), st.ModTime().UTC().Format(time.RFC3339), st.IsDir(), st.Mode().IsRegular(), st.Mode().Perm())), nil
	})
	s.AddTool(mcp.NewTool("list_directory", mcp.WithDescription("Get a detailed listing of all files and directories in a specified path."),
		mcp.WithString("path", mcp.Required())), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		p, err := inside(req.GetString("path", ""))
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		ents, err := os.ReadDir(p)
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		var b strings.Builder
		for _, e := range ents {
			kind := "[FILE]"
			if e.IsDir() {
				kind = "[DIR]"
			}
			fmt.Fprintf(&b, "%s %s\n", kind, e.Name())
		}
		return mcp.NewToolResultText(b.String()), nil
	})
	s.AddTool(mcp.NewTool("write_file", mcp.WithDescription("Create a new file or completely overwrite an existing file with new content."),
		mcp.WithString("path", mcp.Required()), mcp.WithString("content", mcp.Required())), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		p, err := inside(req.GetString("path", ""))
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		if err := os.WriteFile(p, []byte(req.GetString("content", "")), 0o644); err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		return mcp.NewToolResultText("Successfully wrote to " + req.GetString("path", "")), nil
	})
	if err := mcpserve.Serve(context.Background(), s, mcpserve.Options{Stdin: os.Stdin, Stdout: os.Stdout, Log: os.Stderr}); err != nil {
		fmt.Fprintf(os.Stderr, "npx (test stand-in): %v\n", err)
		return 1
	}
	return 0
}
