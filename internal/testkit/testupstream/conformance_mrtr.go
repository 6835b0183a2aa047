package testupstream

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The conformance suite's multi-round tools and prompt (2026-07-28,
// scenarios input-required-result-*), answered raw as the multi-round mode
// answers (so whatever protocol the client initialised with), following
// each scenario's published description.

var mrtrTools = []string{
	"test_input_required_result_elicitation", "test_input_required_result_sampling", "test_input_required_result_list_roots",
	"test_input_required_result_request_state", "test_input_required_result_multiple_inputs", "test_input_required_result_multi_round",
	"test_input_required_result_tampered_state", "test_input_required_result_capabilities",
}

const mrtrPrompt = "test_input_required_result_prompt"

// addConformanceMRTR lists the tools and the prompt, so that a client (or
// a proxy) in front knows them.
func addConformanceMRTR(s *server.MCPServer) {
	never := func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultError("testupstream: answered before it gets here"), nil
	}
	for _, name := range mrtrTools {
		s.AddTool(mcp.NewTool(name, mcp.WithDescription("A multi-round tool of the conformance suite.")), never)
	}
	s.AddPrompt(mcp.NewPrompt(mrtrPrompt, mcp.WithPromptDescription("A prompt that asks for context first.")),
		func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return nil, fmt.Errorf("testupstream: answered before it gets here")
		})
}

const (
	askName    = `"user_name":{"method":"elicitation/create","params":{"message":"What is your name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}}`
	askCapital = `"capital_question":{"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"What is the capital of France?"}}],"maxTokens":100}}`
	askRoots   = `"client_roots":{"method":"roots/list","params":{}}`
	askConfirm = `"confirm":{"method":"elicitation/create","params":{"message":"Please confirm","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}}}`
	askGreet   = `"greeting":{"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"Generate a greeting"}}],"maxTokens":50}}`
	askStep1   = `"step1":{"method":"elicitation/create","params":{"message":"Step 1: What is your name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}}`
	askStep2   = `"step2":{"method":"elicitation/create","params":{"message":"Step 2: What is your favorite color?","requestedSchema":{"type":"object","properties":{"color":{"type":"string"}},"required":["color"]}}}`
	askContext = `"user_context":{"method":"elicitation/create","params":{"message":"What context should the prompt use?","requestedSchema":{"type":"object","properties":{"context":{"type":"string"}},"required":["context"]}}}`
)

// tamperKey signs the tampered-state tool's requestState.
var tamperKey = []byte("testupstream tampered-state key")

func tamperState() string {
	m := hmac.New(sha256.New, tamperKey)
	m.Write([]byte("round-1"))
	return "round-1." + hex.EncodeToString(m.Sum(nil))
}

func asking(state string, requests ...string) string {
	s := `{"resultType":"input_required","inputRequests":{` + strings.Join(requests, ",") + `}`
	if state != "" {
		s += `,"requestState":` + quote(state)
	}
	return s + `}`
}

func textResult(text string) string {
	return `{"resultType":"complete","content":[{"type":"text","text":` + quote(text) + `}]}`
}

// mrtrAnswer answers one conformance multi-round request raw: the result,
// or a JSON-RPC error (errMsg); ok is false for any other request.
func mrtrAnswer(method string, params json.RawMessage) (result string, errMsg string, ok bool) {
	var p struct {
		Name      string                     `json:"name"`
		Responses map[string]json.RawMessage `json:"inputResponses"`
		State     string                     `json:"requestState"`
		Meta      struct {
			Caps map[string]json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
		} `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return "", "", false
	}
	accepted := func(id, field string) (string, bool) {
		var r struct {
			Action  string         `json:"action"`
			Content map[string]any `json:"content"`
		}
		if json.Unmarshal(p.Responses[id], &r) != nil || r.Action != "accept" {
			return "", false
		}
		v, ok := r.Content[field]
		return fmt.Sprint(v), ok
	}
	has := func(ids ...string) bool {
		for _, id := range ids {
			if _, ok := p.Responses[id]; !ok {
				return false
			}
		}
		return true
	}
	if method == "prompts/get" {
		if p.Name != mrtrPrompt {
			return "", "", false
		}
		if ctx, ok := accepted("user_context", "context"); ok {
			return `{"resultType":"complete","messages":[{"role":"user","content":{"type":"text","text":` + quote("Use this context: "+ctx) + `}}]}`, "", true
		}
		return asking("", askContext), "", true
	}
	if method != "tools/call" {
		return "", "", false
	}
	switch p.Name {
	case "test_input_required_result_elicitation":
		if name, ok := accepted("user_name", "name"); ok {
			return textResult("Hello, " + name + "!"), "", true
		}
		return asking("", askName), "", true
	case "test_input_required_result_sampling":
		var r struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if has("capital_question") && json.Unmarshal(p.Responses["capital_question"], &r) == nil {
			return textResult("The model said: " + r.Content.Text), "", true
		}
		return asking("", askCapital), "", true
	case "test_input_required_result_list_roots":
		var r struct {
			Roots []struct {
				URI string `json:"uri"`
			} `json:"roots"`
		}
		if has("client_roots") && json.Unmarshal(p.Responses["client_roots"], &r) == nil && r.Roots != nil {
			var uris []string
			for _, root := range r.Roots {
				uris = append(uris, root.URI)
			}
			return textResult("Roots: " + strings.Join(uris, ", ")), "", true
		}
		return asking("", askRoots), "", true
	case "test_input_required_result_request_state":
		if has("confirm") {
			if p.State != "confirm-state-1" {
				return "", "requestState does not match", true
			}
			return textResult("state-ok: confirmed"), "", true
		}
		return asking("confirm-state-1", askConfirm), "", true
	case "test_input_required_result_multiple_inputs":
		if has("user_name", "greeting", "client_roots") && p.State == "multi-state-1" {
			return textResult("all inputs received"), "", true
		}
		return asking("multi-state-1", askName, askGreet, askRoots), "", true
	case "test_input_required_result_multi_round":
		switch {
		case p.State == "round-state-2" && has("step2"):
			return textResult("multi-round done"), "", true
		case p.State == "round-state-1" && has("step1"):
			return asking("round-state-2", askStep2), "", true
		}
		return asking("round-state-1", askStep1), "", true
	case "test_input_required_result_tampered_state":
		if p.State != "" {
			if !hmac.Equal([]byte(p.State), []byte(tamperState())) {
				return "", "requestState failed its integrity check", true
			}
			return textResult("state verified"), "", true
		}
		return asking(tamperState(), askConfirm), "", true
	case "test_input_required_result_capabilities":
		if len(p.Responses) > 0 {
			return textResult("capabilities respected"), "", true
		}
		var reqs []string
		if _, ok := p.Meta.Caps["elicitation"]; ok {
			reqs = append(reqs, askName)
		}
		if _, ok := p.Meta.Caps["sampling"]; ok {
			reqs = append(reqs, askCapital)
		}
		if len(reqs) == 0 {
			return textResult("the client declared neither elicitation nor sampling"), "", true
		}
		return asking("", reqs...), "", true
	}
	return "", "", false
}
