package testupstream

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The conformance tool set (--conformance) implements the tools that the
// server scenarios of @modelcontextprotocol/conformance call, so that those
// scenarios test something real: content types, logging and progress
// notifications, sampling and elicitation round trips, and JSON Schema
// 2020-12 keywords. Behaviour follows each scenario's published description.

const (
	pngRedPixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
	wavSilence  = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA=="

	jsonSchema202012 = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "$defs": {
    "address": {
      "type": "object",
      "properties": {
        "street": {"type": "string"},
        "city": {"type": "string"}
      }
    }
  },
  "properties": {
    "name": {"type": "string"},
    "address": {"$ref": "#/$defs/address"}
  },
  "additionalProperties": false
}`
)

// notificationGap spaces the notifications of the logging and progress tools
// as the scenarios describe (~50 ms), so clients see them arrive mid-call.
const notificationGap = 50 * time.Millisecond

func addConformanceTools(s *server.MCPServer, t *tools) {
	noArgs := func(name, desc string) mcp.Tool { return mcp.NewTool(name, mcp.WithDescription(desc)) }
	s.AddTool(noArgs("test_simple_text", "Return a simple text."), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("This is a simple text response for testing."), nil
	})
	s.AddTool(noArgs("test_image_content", "Return a 1x1 PNG image."), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewImageContent(pngRedPixel, "image/png")}}, nil
	})
	s.AddTool(noArgs("test_audio_content", "Return a short WAV sound."), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewAudioContent(wavSilence, "audio/wav")}}, nil
	})
	s.AddTool(noArgs("test_embedded_resource", "Return an embedded text resource."), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewEmbeddedResource(mcp.TextResourceContents{
			URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource content.",
		})}}, nil
	})
	s.AddTool(noArgs("test_multiple_content_types", "Return text, image and resource content."), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			mcp.NewTextContent("Multiple content types test:"),
			mcp.NewImageContent(pngRedPixel, "image/png"),
			mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: "test://mixed-content-resource", MIMEType: "application/json", Text: `{"test":"data","value":123}`}),
		}}, nil
	})
	s.AddTool(noArgs("test_error_handling", "Always fail with a tool error."), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultError("This tool intentionally returns an error for testing"), nil
	})
	s.AddTool(noArgs("test_tool_with_logging", "Send three info log notifications while running."), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
			if i > 0 {
				if err := sleep(ctx, notificationGap); err != nil {
					return nil, err
				}
			}
			if err := s.SendNotificationToClient(ctx, "notifications/message", map[string]any{"level": "info", "data": msg}); err != nil {
				return nil, fmt.Errorf("send log notification: %w", err)
			}
		}
		return mcp.NewToolResultText("Tool with logging executed successfully"), nil
	})
	s.AddTool(noArgs("test_tool_with_progress", "Report progress 0, 50, 100 of 100 to the caller's progress token."), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var token mcp.ProgressToken
		if req.Params.Meta != nil {
			token = req.Params.Meta.ProgressToken
		}
		before := 0
		if t.out != nil {
			before = t.out.progressWritten(token)
		}
		sent := 0
		for i, p := range []int{0, 50, 100} {
			if i > 0 {
				if err := sleep(ctx, notificationGap); err != nil {
					return nil, err
				}
			}
			if token == nil {
				continue
			}
			if err := s.SendNotificationToClient(ctx, "notifications/progress", map[string]any{"progressToken": token, "progress": p, "total": 100}); err != nil {
				return nil, fmt.Errorf("send progress: %w", err)
			}
			sent++
		}
		if t.out != nil {
			if err := t.out.waitProgress(ctx, token, before+sent); err != nil {
				return nil, fmt.Errorf("wait for progress notifications: %w", err)
			}
		}
		return mcp.NewToolResultText(fmt.Sprintf("Tool with progress executed successfully (%d notifications)", sent)), nil
	})
	s.AddTool(mcp.NewTool("test_sampling", mcp.WithDescription("Ask the client's LLM (sampling/createMessage) and return its answer."),
		mcp.WithString("prompt", mcp.Required(), mcp.Description("The prompt to send to the LLM"))), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		cm := mcp.CreateMessageRequest{}
		cm.CreateMessageParams.Messages = []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.TextContent{Type: "text", Text: req.GetString("prompt", "")}}}
		cm.CreateMessageParams.MaxTokens = 100
		//lint:ignore SA1019 the conformance scenario asks for sampling, a server-initiated request of the 2025 protocol versions
		res, err := s.RequestSampling(ctx, cm)
		if err != nil {
			return mcp.NewToolResultError(fmt.Sprintf("sampling failed: %v", err)), nil
		}
		text := ""
		if tc, ok := res.Content.(mcp.TextContent); ok {
			text = tc.Text
		} else if b, err := json.Marshal(res.Content); err == nil {
			text = string(b)
		}
		return mcp.NewToolResultText("LLM response: " + text), nil
	})
	s.AddTool(mcp.NewTool("test_elicitation", mcp.WithDescription("Ask the user for a username and email (elicitation/create) and return the answer."),
		mcp.WithString("message", mcp.Required(), mcp.Description("The message to show the user"))), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		er := mcp.ElicitationRequest{}
		er.Params.Message = req.GetString("message", "")
		er.Params.RequestedSchema = map[string]any{
			"type": "object",
			"properties": map[string]any{
				"username": map[string]any{"type": "string", "description": "User's response"},
				"email":    map[string]any{"type": "string", "description": "User's email address"},
			},
			"required": []string{"username", "email"},
		}
		res, err := s.RequestElicitation(ctx, er)
		if err != nil {
			return mcp.NewToolResultError(fmt.Sprintf("elicitation failed: %v", err)), nil
		}
		b, err := json.Marshal(res.Content)
		if err != nil {
			return nil, fmt.Errorf("encode elicitation content: %w", err)
		}
		return mcp.NewToolResultText(fmt.Sprintf("User response: action=%s, content=%s", res.Action, b)), nil
	})
	s.AddTool(mcp.NewToolWithRawSchema("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", json.RawMessage(jsonSchema202012)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("ok"), nil
		})
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cancelled: %w", ctx.Err())
	}
}
