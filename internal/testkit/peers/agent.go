package peers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/planlock/planlock/internal/testkit/leakcheck"
)

// agentTimeout bounds one agent run: a guard against a hung peer, not a
// speed assertion.
const agentTimeout = 3 * time.Minute

// groupGrace is how long what a peer started may take to leave by itself
// once the peer exited, before it is killed (leakcheck.EndGroup).
const groupGrace = 10 * time.Second

// Target says how the agent reaches its MCP server.
type Target struct {
	Command []string // stdio: argv of the server (or of the proxy in front of it)
	URL     string   // streamable HTTP endpoint
	Token   string   // bearer token for URL, optional
	// OAuth, when set, makes the SDK client get its token on its own from
	// the authorization server the server's protected resource metadata
	// names (instead of Token).
	OAuth *OAuthClient
	Env   []string // extra KEY=VALUE for the agent and, over stdio, the server it starts
	// Negotiation, when set, runs the TypeScript SDK v2 client
	// (agent-v2.mjs) with this versionNegotiation: "legacy", "auto" or a
	// revision to pin such as "2026-07-28". It runs the steps listTools,
	// callTool, request and ping, with the script's sampling and
	// elicitation answers, without OAuth.
	Negotiation string
}

// OAuthClient is how the agent authenticates to the authorization server:
// the client_credentials grant with ClientID and ClientSecret, or, with
// Code, dynamic registration and the authorization code grant with PKCE
// (the authorization server must approve without a login page).
type OAuthClient struct {
	Issuer                 string // the authorization server the client expects
	ClientID, ClientSecret string
	Code                   bool
}

// Stdio is a Target that starts argv and speaks MCP over its stdin/stdout.
func Stdio(argv ...string) Target { return Target{Command: argv} }

// HTTP is a Target at a streamable HTTP URL, with an optional bearer token.
func HTTP(url, token string) Target { return Target{URL: url, Token: token} }

// Script is what the agent does after connecting.
type Script struct {
	Steps []Step `json:"steps"`
	// Sampling, when set, declares the sampling capability and answers every
	// sampling/createMessage with this text.
	Sampling *SamplingAnswer `json:"sampling,omitempty"`
	// Elicitation, when set, declares the elicitation capability and answers
	// every elicitation/create with it.
	Elicitation *ElicitationAnswer `json:"elicitation,omitempty"`
	// ConnectTimeoutMs bounds the initialize handshake (default 60 s).
	ConnectTimeoutMs int `json:"connectTimeoutMs,omitempty"`
}

// SamplingAnswer is the agent's canned LLM answer.
type SamplingAnswer struct {
	Text string `json:"text"`
}

// ElicitationAnswer is the agent's canned user answer.
type ElicitationAnswer struct {
	Action  string         `json:"action"` // accept, decline, cancel
	Content map[string]any `json:"content,omitempty"`
}

// Step is one action of the agent. Build steps with the helpers below.
type Step struct {
	Op            string `json:"op"`
	Name          string `json:"name,omitempty"`
	Arguments     any    `json:"arguments,omitempty"` // a map, json.RawMessage, …; nil sends no arguments
	Progress      bool   `json:"progress,omitempty"`
	CancelAfterMs int    `json:"cancelAfterMs,omitempty"`
	TimeoutMs     int    `json:"timeoutMs,omitempty"`
	Method        string `json:"method,omitempty"`
	Params        any    `json:"params,omitempty"`
	Ms            int    `json:"ms,omitempty"`
	Steps         []Step `json:"steps,omitempty"`
}

// ListTools lists the server's tools.
func ListTools() Step { return Step{Op: "listTools"} }

// CallTool calls a tool; args nil sends no "arguments" member.
func CallTool(name string, args any) Step { return Step{Op: "callTool", Name: name, Arguments: args} }

// WithProgress asks for progress notifications (the SDK sends a progress token).
func (s Step) WithProgress() Step { s.Progress = true; return s }

// CancelAfter cancels the call after ms milliseconds (notifications/cancelled).
func (s Step) CancelAfter(ms int) Step { s.CancelAfterMs = ms; return s }

// Timeout sets the client-side request timeout of the step.
func (s Step) Timeout(ms int) Step { s.TimeoutMs = ms; return s }

// Request sends any JSON-RPC request.
func Request(method string, params any) Step {
	return Step{Op: "request", Method: method, Params: params}
}

// Ping sends ping.
func Ping() Step { return Step{Op: "ping"} }

// Sleep pauses the script.
func Sleep(ms int) Step { return Step{Op: "sleep", Ms: ms} }

// Parallel runs steps concurrently; their results are reported with ids
// "N.0", "N.1", … before the parallel step's own result "N".
func Parallel(steps ...Step) Step { return Step{Op: "parallel", Steps: steps} }

// Result is one JSON line of the agent.
type Result struct {
	Step        string            `json:"step"` // "" for connect and serverRequest lines
	Op          string            `json:"op"`
	Name        string            `json:"name"`
	Method      string            `json:"method"`
	OK          bool              `json:"ok"`      // the request got a result (a tool error is still OK)
	IsError     bool              `json:"isError"` // the tool result's isError
	Text        string            `json:"text"`    // the tool result's text content, joined
	Tools       []string          `json:"tools"`   // listTools: the names
	Result      json.RawMessage   `json:"result"`  // the full result as received
	Error       *RPCError         `json:"error"`
	Cancelled   bool              `json:"cancelled"`
	Progress    []json.RawMessage `json:"progress"`
	LogMessages int               `json:"logMessages"` // logging notifications received during the call
	Params      json.RawMessage   `json:"params"`      // serverRequest: the request's params
	Server      json.RawMessage   `json:"server"`      // connect: serverInfo
	// Era and ProtocolVersion (connect, SDK v2 agent): what the
	// connection negotiated, "modern" or "legacy", and the revision.
	Era             string `json:"era"`
	ProtocolVersion string `json:"protocolVersion"`
	Count           int    `json:"count"` // parallel: number of sub-steps
}

// RPCError is a failed request: a JSON-RPC error (Code set) or a transport
// failure, timeout or cancellation (Code nil).
type RPCError struct {
	Code    *int            `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
	Name    string          `json:"name,omitempty"`
}

// Transcript is everything the agent printed.
type Transcript struct {
	Connect        Result   // the connect line (OK false: the server could not be reached or initialised)
	Results        []Result // step results in the order printed
	ServerRequests []Result // sampling/elicitation requests the server sent the agent
	Stderr         string   // the agent's stderr (and a stdio server's)
	ExitCode       int
}

// Step returns the result with the given id ("0", "1", "2.3"), or fails.
func (tr Transcript) Step(t testing.TB, id string) Result {
	t.Helper()
	for _, r := range tr.Results {
		if r.Step == id {
			return r
		}
	}
	t.Fatalf("peers: agent printed no result for step %s; transcript:\n%s", id, tr)
	return Result{}
}

func (tr Transcript) String() string {
	var b strings.Builder
	c, _ := json.Marshal(tr.Connect)
	fmt.Fprintf(&b, "%s\n", c)
	for _, r := range tr.Results {
		j, _ := json.Marshal(r)
		fmt.Fprintf(&b, "%s\n", j)
	}
	fmt.Fprintf(&b, "exit %d; stderr:\n%s", tr.ExitCode, tr.Stderr)
	return b.String()
}

// RunAgent runs test/peers/agent.mjs against target with script and returns
// its transcript. It fails the test only when the agent itself cannot run or
// prints something unreadable; a failed connection is in Transcript.Connect.
func RunAgent(t testing.TB, target Target, script Script) Transcript {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), agentTimeout)
	defer cancel()
	tr, err := RunAgentContext(ctx, Dir(t), target, script)
	if err != nil {
		t.Fatalf("peers: agent: %v", err)
	}
	return tr
}

// RunAgentContext is RunAgent without testing.TB (benchmarks, TestMain).
// peersDir is test/peers (see Dir).
func RunAgentContext(ctx context.Context, peersDir string, target Target, script Script) (Transcript, error) {
	if script.Steps == nil {
		script.Steps = []Step{}
	}
	js, err := json.Marshal(script)
	if err != nil {
		return Transcript{}, fmt.Errorf("encode script: %w", err)
	}
	args := []string{filepath.Join(peersDir, "agent.mjs")}
	if target.Negotiation != "" {
		if target.OAuth != nil {
			return Transcript{}, fmt.Errorf("the SDK v2 agent runs without OAuth")
		}
		args = []string{filepath.Join(peersDir, "agent-v2.mjs"), "--negotiation", target.Negotiation}
	}
	switch {
	case target.URL != "" && len(target.Command) > 0:
		return Transcript{}, fmt.Errorf("target has both a URL and a command")
	case target.URL != "":
		args = append(args, "--url", target.URL)
		if target.Token != "" {
			args = append(args, "--token", target.Token)
		}
		if o := target.OAuth; o != nil {
			args = append(args, "--oauth-issuer", o.Issuer)
			if o.Code {
				args = append(args, "--oauth-code")
			} else {
				args = append(args, "--oauth-client-id", o.ClientID, "--oauth-client-secret", o.ClientSecret)
			}
		}
	case len(target.Command) > 0:
		args = append(append(args, "--"), target.Command...)
	default:
		return Transcript{}, fmt.Errorf("target has neither a URL nor a command")
	}
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = peersDir
	cmd.Env = append(os.Environ(), target.Env...)
	cmd.Stdin = bytes.NewReader(js)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	// A stdio server started by the agent may keep the stderr pipe open after
	// the agent exits; don't wait for it forever.
	cmd.WaitDelay = 5 * time.Second
	// The agent and the stdio server it starts share a process group that
	// is ended once the agent exits, whichever way: a server the agent did
	// not stop (one hanging in a call) must not outlive the test.
	leakcheck.OwnGroup(cmd)
	runErr := cmd.Run()
	leakcheck.EndGroup(cmd, groupGrace)
	tr := Transcript{Stderr: stderr.String()}
	if cmd.ProcessState != nil {
		tr.ExitCode = cmd.ProcessState.ExitCode()
	}
	if ctx.Err() != nil {
		return tr, fmt.Errorf("agent did not finish: %w\nstdout:\n%s\nstderr:\n%s", ctx.Err(), stdout.String(), stderr.String())
	}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	sawConnect := false
	for sc.Scan() {
		var r Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			line := sc.Text()
			if len(line) > 300 {
				line = line[:300] + "…"
			}
			return tr, fmt.Errorf("agent printed a non-JSON line %q: %w", line, err)
		}
		switch {
		case r.Op == "connect":
			tr.Connect = r
			sawConnect = true
		case r.Op == "serverRequest":
			tr.ServerRequests = append(tr.ServerRequests, r)
		case r.Op == "script":
			return tr, fmt.Errorf("agent rejected the script: %s", r.Error.Message)
		default:
			tr.Results = append(tr.Results, r)
		}
	}
	if err := sc.Err(); err != nil {
		return tr, fmt.Errorf("read agent output: %w", err)
	}
	if !sawConnect {
		return tr, fmt.Errorf("agent printed no connect line (%v); stderr:\n%s", runErr, stderr.String())
	}
	return tr, nil
}
