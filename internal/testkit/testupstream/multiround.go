package testupstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The multi-round mode: an upstream that answers the tool "ask", the
// resources test://ask/<type>, the prompt "ask" and the completion of its
// argument typed "raw:<type>" with a result of
// protocol 2026-07-28's multi-round kinds (resultType "input_required" with
// inputRequests asking for a password and an LLM completion, "task", or any
// other type), whatever protocol the client initialised with. mcp-go's own
// server would turn an input_required result into server-to-client requests
// for a client of an older protocol, so these answers are written raw,
// before mcp-go sees the request. A retry carrying inputResponses is
// recorded in the calls log like any call, so a test sees whether one
// reached the upstream.

// addMultiRound lists what the mode answers raw, so that a client (or a
// proxy) in front knows the tool, resource and prompt.
func addMultiRound(s *server.MCPServer) {
	never := func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultError("testupstream: ask is answered before it gets here"), nil
	}
	s.AddTool(mcp.NewTool("ask", mcp.WithDescription("Answer with a result of the given resultType (input_required asks for a password)."),
		mcp.WithString("resultType", mcp.Required())), never)
	s.AddTool(mcp.NewTool("touch", mcp.WithDescription("Send notifications/resources/updated for the uri."),
		mcp.WithString("uri", mcp.Required())), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		uri := req.GetString("uri", "")
		s.SendNotificationToAllClients(string(mcp.MethodNotificationResourceUpdated), map[string]any{"uri": uri})
		return mcp.NewToolResultText("touched " + uri), nil
	})
	s.AddResource(mcp.NewResource("test://ask/input_required", "ask", mcp.WithMIMEType("text/plain")),
		func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return nil, fmt.Errorf("testupstream: answered before it gets here")
		})
	s.AddPrompt(mcp.NewPrompt("ask", mcp.WithArgument("resultType")),
		func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return nil, fmt.Errorf("testupstream: answered before it gets here")
		})
}

// The input requests the mode asks for, by resultType: input_required
// asks for a password and an LLM completion; elicit for the password
// only; sample for the completion only; url for a visit to an https page;
// roots for the client's roots; twice asks for the password, then (on the
// retry) for a confirmation, and completes on the second retry. A retry
// (a request with requestState) completes with its answers, and the
// requestState it came with, in the text.
var askInputs = map[string]string{
	"password": `"password":{"method":"elicitation/create","params":{"mode":"form","message":"enter your password",` +
		`"requestedSchema":{"type":"object","properties":{"password":{"type":"string"}},"required":["password"]}}}`,
	"llm":   `"llm":{"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"say the secret"}}],"maxTokens":100}}`,
	"url":   `"login":{"method":"elicitation/create","params":{"mode":"url","message":"log in","url":"https://auth.example.com/login?x=1","elicitationId":"e-1"}}`,
	"roots": `"roots":{"method":"roots/list"}`,
	"confirm": `"confirm":{"method":"elicitation/create","params":{"mode":"form","message":"sure?",` +
		`"requestedSchema":{"type":"object","properties":{"sure":{"type":"boolean"}},"required":["sure"]}}}`,
}

func inputRequired(state string, names ...string) string {
	var parts []string
	for _, n := range names {
		parts = append(parts, askInputs[n])
	}
	return `{"resultType":"input_required","inputRequests":{` + strings.Join(parts, ",") + `},"requestState":` + quote(state) + `}`
}

// rawResult is the raw result of resultType rt for method; complete is a
// plain result of the method's kind carrying inputRequests all the same.
// state and answers are a retry's requestState and inputResponses.
func rawResult(method, rt, state string, answers json.RawMessage) string {
	inputs := `"inputRequests":{` + askInputs["password"] + `,` + askInputs["llm"] + `},"requestState":"upstream-state-1"`
	text := map[string]string{"resources/read": "read done", "prompts/get": "prompt done", "completion/complete": "completion done"}[method]
	if text == "" {
		text = "call done"
	}
	if state != "" {
		if rt == "twice" && state == "upstream-state-1" {
			return inputRequired("upstream-state-2", "confirm")
		}
		text += "; state " + state + "; answers " + string(answers)
	}
	var body string
	switch method {
	case "resources/read":
		body = `"contents":[{"uri":"test://ask/complete","mimeType":"text/plain","text":` + quote(text) + `}]`
	case "prompts/get":
		body = `"messages":[{"role":"user","content":{"type":"text","text":` + quote(text) + `}}]`
	case "completion/complete":
		body = `"completion":{"values":[` + quote(text) + `]}`
	default:
		body = `"content":[{"type":"text","text":` + quote(text) + `}]`
	}
	if state != "" {
		return `{` + body + `}`
	}
	switch rt {
	case "input_required":
		return `{"resultType":"input_required",` + inputs + `}`
	case "elicit", "twice":
		return inputRequired("upstream-state-1", "password")
	case "sample":
		return inputRequired("upstream-state-1", "llm")
	case "url":
		return inputRequired("upstream-state-1", "url")
	case "roots":
		return inputRequired("upstream-state-1", "roots")
	case "task":
		return `{"resultType":"task","task":{"taskId":"task-1","status":"working","createdAt":"2026-12-01T12:00:00Z","ttl":60000}}`
	case "absent":
		return `{` + body + `,` + inputs + `}`
	case "null":
		return `{"resultType":null,` + body + `}`
	case "number":
		return `{"resultType":7,` + body + `}`
	case "structured":
		// Not complete, yet with the structured content a pin reads.
		return `{"resultType":"input_required","structuredContent":{"status":"ok"},` + body + `,` + inputs + `}`
	}
	return `{"resultType":` + quote(rt) + `,` + body + `,` + inputs + `}`
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// rawRequest reads a request the mode answers raw: its id, method and the
// resultType asked for; ok is false for any other message.
func rawRequest(line []byte) (id json.RawMessage, method, rt string, args json.RawMessage, ok bool) {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name      string          `json:"name"`
			URI       string          `json:"uri"`
			Arguments json.RawMessage `json:"arguments"`
			Ref       struct {
				Name string `json:"name"`
			} `json:"ref"`
			Argument struct {
				Value string `json:"value"`
			} `json:"argument"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &msg) != nil || len(msg.ID) == 0 {
		return nil, "", "", nil, false
	}
	defer func() {
		if ok {
			// A retry's requestState and answers ride along to
			// rawResponse in the resultType.
			var r struct {
				Params struct {
					State   string          `json:"requestState"`
					Answers json.RawMessage `json:"inputResponses"`
				} `json:"params"`
			}
			_ = json.Unmarshal(line, &r)
			if r.Params.State != "" {
				rt += "\x00" + r.Params.State + "\x00" + string(r.Params.Answers)
			}
		}
	}()
	var a struct {
		ResultType string `json:"resultType"`
	}
	switch {
	case msg.Method == "tools/call" && msg.Params.Name == "ask",
		msg.Method == "prompts/get" && msg.Params.Name == "ask":
		_ = json.Unmarshal(msg.Params.Arguments, &a)
	case msg.Method == "resources/read" && strings.HasPrefix(msg.Params.URI, "test://ask/"):
		a.ResultType = strings.TrimPrefix(msg.Params.URI, "test://ask/")
	case msg.Method == "completion/complete" && msg.Params.Ref.Name == "ask" && strings.HasPrefix(msg.Params.Argument.Value, "raw:"):
		// A completion of the prompt's argument typed "raw:<type>"
		// (any other is completer's).
		a.ResultType = strings.TrimPrefix(msg.Params.Argument.Value, "raw:")
	default:
		return nil, "", "", nil, false
	}
	var params struct {
		Params json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(line, &params)
	return msg.ID, msg.Method, a.ResultType, params.Params, true
}

func rawResponse(id json.RawMessage, method, rt string) []byte {
	parts := strings.SplitN(rt, "\x00", 3)
	state, answers := "", json.RawMessage(nil)
	if len(parts) == 3 {
		state, answers = parts[1], json.RawMessage(parts[2])
	}
	return []byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":` + rawResult(method, parts[0], state, answers) + "}\n")
}

// rawReply is the raw answer to a request one of the raw sets answers: the
// multi-round mode's (multi), the conformance suite's multi-round tools
// (conf); ok is false for any other message.
func rawReply(line []byte, multi, conf bool) (reply []byte, method string, params json.RawMessage, ok bool) {
	if multi {
		if id, method, rt, params, ok := rawRequest(line); ok {
			return rawResponse(id, method, rt), method, params, true
		}
	}
	if !conf {
		return nil, "", nil, false
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(line, &msg) != nil || len(msg.ID) == 0 {
		return nil, "", nil, false
	}
	res, errMsg, ok := mrtrAnswer(msg.Method, msg.Params)
	if !ok {
		return nil, "", nil, false
	}
	if errMsg != "" {
		return []byte(`{"jsonrpc":"2.0","id":` + string(msg.ID) + `,"error":{"code":-32602,"message":` + quote(errMsg) + `}}` + "\n"), msg.Method, msg.Params, true
	}
	return []byte(`{"jsonrpc":"2.0","id":` + string(msg.ID) + `,"result":` + res + "}\n"), msg.Method, msg.Params, true
}

// rawAnswers answers the raw sets' requests on stdin raw on out and passes
// every other line on to what it returns (mcp-go's reader).
func rawAnswers(stdin io.Reader, out io.Writer, rec *recorder, multi, conf bool) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 64*1024), 64<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if reply, method, params, ok := rawReply(line, multi, conf); ok {
				rec.record(method, params)
				if _, err := out.Write(reply); err != nil {
					pw.CloseWithError(err)
					return
				}
				continue
			}
			if _, err := pw.Write(append(bytes.Clone(line), '\n')); err != nil {
				return
			}
		}
		pw.CloseWithError(sc.Err())
	}()
	return pr
}

// answerRawHTTP answers the raw sets' requests over HTTP raw; false leaves
// the request (its body restored) to mcp-go.
func answerRawHTTP(w http.ResponseWriter, r *http.Request, rec *recorder, multi, conf bool) bool {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return true
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	reply, method, params, ok := rawReply(body, multi, conf)
	if !ok {
		return false
	}
	rec.record(method, params)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(reply)
	return true
}

// completer suggests the resultTypes the multi-round mode answers, for any
// prompt argument.
type completer struct{}

func (completer) CompletePromptArgument(_ context.Context, _ string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	var out []string
	for _, v := range []string{"complete", "elicit", "input_required", "sample", "task", "twice"} {
		if strings.HasPrefix(v, arg.Value) {
			out = append(out, v)
		}
	}
	return &mcp.Completion{Values: out, Total: len(out)}, nil
}
