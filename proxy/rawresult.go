package proxy

import (
	"bytes"
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"
)

// relayResult reads an upstream tool result for the client. A plain result
// (content of the types MCP defines, structuredContent, isError) keeps each
// content item as the upstream wrote it, and mcp-go writes those bytes back
// out: decoding every item into mcp-go's types and encoding it again cost
// more than the gate does. A result with anything more (_meta, a request
// for input) goes through mcp-go's parser, as do results it would refuse.
func relayResult(res json.RawMessage) (*mcp.CallToolResult, error) {
	var r struct {
		Content    []rawContent    `json:"content"`
		Structured json.RawMessage `json:"structuredContent"`
		IsError    bool            `json:"isError"`
		// Relayed only through mcp-go's types.
		Meta          json.RawMessage `json:"_meta"`
		ResultType    json.RawMessage `json:"resultType"`
		InputRequests json.RawMessage `json:"inputRequests"`
		RequestState  json.RawMessage `json:"requestState"`
	}
	if json.Unmarshal(res, &r) != nil || r.Content == nil ||
		r.Meta != nil || r.ResultType != nil || r.InputRequests != nil || r.RequestState != nil {
		return mcp.ParseCallToolResult(&res)
	}
	out := &mcp.CallToolResult{IsError: r.IsError, Content: make([]mcp.Content, len(r.Content))}
	for i, c := range r.Content {
		if !knownContent[c.Type] {
			return mcp.ParseCallToolResult(&res)
		}
		out.Content[i] = c
	}
	if len(r.Structured) > 0 && !bytes.Equal(r.Structured, []byte("null")) {
		out.RawStructuredContent = r.Structured
		out.StructuredContent = r.Structured
	}
	return out, nil
}

var knownContent = map[string]bool{"text": true, "image": true, "audio": true, "resource": true, "resource_link": true}

// rawContent is one content item relayed as the upstream wrote it; its type
// and text are read for the outcome's record (firstText).
type rawContent struct {
	mcp.TextContent // Type and Text; also what makes it an mcp.Content
	raw             json.RawMessage
}

func (c *rawContent) UnmarshalJSON(b []byte) error {
	var head struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return err
	}
	c.Type, c.Text = head.Type, head.Text
	c.raw = append(json.RawMessage(nil), b...)
	return nil
}

func (c rawContent) MarshalJSON() ([]byte, error) { return c.raw, nil }

// contentText is the text of a text content item, relayed raw or not.
func contentText(c mcp.Content) (string, bool) {
	switch t := c.(type) {
	case mcp.TextContent:
		return t.Text, true
	case rawContent:
		return t.Text, t.Type == "text"
	}
	return "", false
}

// appendToolResult appends res as the MCP server would encode it (the same
// fields, in the same order), writing items relayed raw as the upstream
// wrote them; a result with more than content, structuredContent and
// isError is encoded by mcp-go.
func appendToolResult(b []byte, res *mcp.CallToolResult) ([]byte, error) {
	if res.Meta != nil || res.ResultType != "" || len(res.InputRequests) > 0 || res.RequestState != "" ||
		(len(res.RawStructuredContent) == 0 && res.StructuredContent != nil) {
		m, err := json.Marshal(res)
		return append(b, m...), err
	}
	b = append(b, `{"content":[`...)
	for i, c := range res.Content {
		if i > 0 {
			b = append(b, ',')
		}
		if r, ok := c.(rawContent); ok {
			b = append(b, r.raw...)
			continue
		}
		m, err := json.Marshal(c)
		if err != nil {
			return b, err
		}
		b = append(b, m...)
	}
	b = append(b, ']')
	if res.IsError {
		b = append(b, `,"isError":true`...)
	}
	if len(res.RawStructuredContent) > 0 {
		b = append(b, `,"structuredContent":`...)
		b = append(b, res.RawStructuredContent...)
	}
	return append(b, '}'), nil
}
