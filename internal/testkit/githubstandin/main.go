// Command githubstandin is a stand-in for the GitHub MCP server
// (@modelcontextprotocol/server-github) in tests of
// examples/github-triage/labels.hcl. The real server needs GitHub and a
// token, so it cannot run offline; this one serves the two tools that plan
// uses, get_issue and update_issue, and add_issue_comment (a tool the plan
// does not name), under the same names and with the same inputSchema (the
// JSON Schema the real server derives from its zod schemas), over an
// in-memory repository acme/app with issues 1 to 100.
//
//	githubstandin [--calls-log F]
//
// Stdio only. Like the real server it needs GITHUB_PERSONAL_ACCESS_TOKEN; it
// refuses to start without it, so a test also shows that the plan's upstream
// env passes the token through. Every tools/call received is appended to
// --calls-log as one JSON line (time, tool, arguments), the format of the
// other test upstreams.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/planlock/planlock/internal/mcpserve"
)

// The schemas as the real server lists them (zod-to-json-schema output of
// GetIssueSchema, UpdateIssueOptionsSchema and IssueCommentSchema).
const (
	getIssueSchema = `{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"issue_number":{"type":"number"}},"required":["owner","repo","issue_number"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}`

	commentSchema = `{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"issue_number":{"type":"number"},"body":{"type":"string"}},"required":["owner","repo","issue_number","body"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}`

	updateIssueSchema = `{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"issue_number":{"type":"number"},"title":{"type":"string"},"body":{"type":"string"},"assignees":{"type":"array","items":{"type":"string"}},"milestone":{"type":"number"},"labels":{"type":"array","items":{"type":"string"}},"state":{"type":"string","enum":["open","closed"]}},"required":["owner","repo","issue_number"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}`
)

// TokenEnv is the variable the real server reads its token from.
const TokenEnv = "GITHUB_PERSONAL_ACCESS_TOKEN"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "githubstandin: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, in io.Reader, out, errw io.Writer) error {
	fs := flag.NewFlagSet("githubstandin", flag.ContinueOnError)
	fs.SetOutput(errw)
	callsLog := fs.String("calls-log", "", "append every tools/call received to `FILE` (JSON Lines)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if os.Getenv(TokenEnv) == "" {
		return errors.New(TokenEnv + " is not set")
	}
	rec := &recorder{}
	if *callsLog != "" {
		f, err := os.OpenFile(*callsLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("open calls log: %w", err)
		}
		defer f.Close()
		rec.f = f
	}
	hooks := &server.Hooks{}
	// Before lookup and validation: the log holds every call that arrived.
	hooks.AddBeforeCallTool(func(ctx context.Context, id any, req *mcp.CallToolRequest) { rec.record(req) })
	s := server.NewMCPServer("github-standin", "0.0.0",
		server.WithToolCapabilities(false), server.WithInputSchemaValidation(), server.WithHooks(hooks), server.WithRecovery())
	r := &repo{labels: map[int][]string{}}
	s.AddTool(mcp.NewToolWithRawSchema("get_issue", "Get details of a specific issue in a GitHub repository.", json.RawMessage(getIssueSchema)), r.getIssue)
	s.AddTool(mcp.NewToolWithRawSchema("update_issue", "Update an existing issue in a GitHub repository", json.RawMessage(updateIssueSchema)), r.updateIssue)
	s.AddTool(mcp.NewToolWithRawSchema("add_issue_comment", "Add a comment to an existing issue", json.RawMessage(commentSchema)), r.comment)
	return mcpserve.Serve(ctx, s, mcpserve.Options{Stdin: in, Stdout: out, Log: errw})
}

type recorder struct {
	mu sync.Mutex
	f  *os.File
}

func (r *recorder) record(req *mcp.CallToolRequest) {
	if r.f == nil {
		return
	}
	args, err := json.Marshal(req.GetRawArguments())
	if err != nil {
		args = []byte("null")
	}
	line, err := json.Marshal(struct {
		Time      time.Time       `json:"time"`
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
	}{time.Now().UTC(), req.Params.Name, args})
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = r.f.Write(append(line, '\n'))
}

// repo is acme/app: issues 1 to 100, each with its current labels.
type repo struct {
	mu     sync.Mutex
	labels map[int][]string
}

type issue struct {
	Number int    `json:"number"`
	Title  string `json:"title"`
	State  string `json:"state"`
	Labels []struct {
		Name string `json:"name"`
	} `json:"labels"`
	HTMLURL string `json:"html_url"`
}

// find checks the arguments the way GitHub answers: 404 for anything else.
func (r *repo) find(req mcp.CallToolRequest) (int, error) {
	owner, repo := req.GetString("owner", ""), req.GetString("repo", "")
	n := req.GetInt("issue_number", 0)
	if owner != "acme" || repo != "app" || n < 1 || n > 100 {
		//lint:ignore ST1005 GitHub's own message, as the stand-in answers it
		return 0, fmt.Errorf("Not Found: %s/%s#%d", owner, repo, n)
	}
	return n, nil
}

func (r *repo) issue(n int) *mcp.CallToolResult {
	is := issue{Number: n, Title: fmt.Sprintf("Issue %d", n), State: "open", HTMLURL: fmt.Sprintf("https://github.com/acme/app/issues/%d", n)}
	for _, l := range r.labels[n] {
		is.Labels = append(is.Labels, struct {
			Name string `json:"name"`
		}{l})
	}
	b, err := json.MarshalIndent(is, "", "  ")
	if err != nil {
		return mcp.NewToolResultError(err.Error())
	}
	return mcp.NewToolResultText(string(b))
}

func (r *repo) getIssue(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	n, err := r.find(req)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.issue(n), nil
}

// updateIssue replaces the labels when given, as GitHub's PATCH does.
func (r *repo) updateIssue(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	n, err := r.find(req)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := req.GetArguments()["labels"]; ok {
		r.labels[n] = req.GetStringSlice("labels", nil)
	}
	return r.issue(n), nil
}

func (r *repo) comment(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	n, err := r.find(req)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	return mcp.NewToolResultText(fmt.Sprintf(`{"issue_url": "https://github.com/acme/app/issues/%d", "body": %q}`, n, req.GetString("body", ""))), nil
}
