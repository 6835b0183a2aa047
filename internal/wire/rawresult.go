package wire

import (
	"bytes"
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/internal/jsonscan"
)

// RelayResult reads an upstream tool result for the client. A plain result
// (content of the types MCP defines, structuredContent, isError) keeps each
// content item as the upstream wrote it, and mcp-go writes those bytes back
// out: decoding every item into mcp-go's types and encoding it again cost
// more than the gate does. A result with anything more (_meta, a request
// for input) goes through mcp-go's parser, as do results it would refuse.
//
// A result of a type the gate does not relay (multiround.go) is an
// *UnrelayedResult error; a complete one keeps no inputRequests or
// requestState, which mean nothing there. ScanResult takes only results
// without those members.
func RelayResult(res json.RawMessage) (*mcp.CallToolResult, error) {
	if r, ok := ScanResult(res); ok {
		return r, nil
	}
	if err := CheckResultType(res); err != nil {
		return nil, err
	}
	r, err := DecodeResult(res)
	if r != nil {
		r.ResultType, r.MultiRoundTripResult = "", mcp.MultiRoundTripResult{}
	}
	return r, err
}

// DecodeResult is RelayResult with encoding/json.
func DecodeResult(res json.RawMessage) (*mcp.CallToolResult, error) {
	var r struct {
		Content    []RawContent    `json:"content"`
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

// RawContent is one content item relayed as the upstream wrote it; its type
// and text are read for the outcome's record (firstText).
type RawContent struct {
	mcp.TextContent // Type and Text; also what makes it an mcp.Content
	Raw             json.RawMessage
}

func (c *RawContent) UnmarshalJSON(b []byte) error {
	var head struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return err
	}
	c.Type, c.Text = head.Type, head.Text
	c.Raw = append(json.RawMessage(nil), b...)
	return nil
}

func (c RawContent) MarshalJSON() ([]byte, error) { return c.Raw, nil }

// ContentText is the text of a text content item, relayed raw or not.
func ContentText(c mcp.Content) (string, bool) {
	switch t := c.(type) {
	case mcp.TextContent:
		return t.Text, true
	case RawContent:
		return t.Text, t.Type == "text"
	}
	return "", false
}

// AppendToolResult appends res as the MCP server would encode it (the same
// fields, in the same order), writing items relayed raw as the upstream
// wrote them; a result with more than content, structuredContent and
// isError is encoded by mcp-go.
func AppendToolResult(b []byte, res *mcp.CallToolResult) ([]byte, error) {
	if res.Meta != nil || res.ResultType != "" || len(res.InputRequests) > 0 || res.RequestState != "" ||
		(len(res.RawStructuredContent) == 0 && res.StructuredContent != nil) {
		m, err := json.Marshal(res)
		return append(b, m...), err
	}
	b, err := AppendContent(append(b, `{"content":`...), res.Content)
	if err != nil {
		return b, err
	}
	if res.IsError {
		b = append(b, `,"isError":true`...)
	}
	if len(res.RawStructuredContent) > 0 {
		b = append(b, `,"structuredContent":`...)
		b = append(b, res.RawStructuredContent...)
	}
	return append(b, '}'), nil
}

var resultNames = []string{"content", "structuredContent", "isError", "_meta", "resultType", "inputRequests", "requestState"}

var contentNames = []string{"type", "text"}

// ScanResult is RelayResult's reading of a plain result with ScanMembers
// (Envelope.go), several times cheaper than encoding/json's; false leaves
// the result to encoding/json, which then reads it exactly as before (so
// ScanResult only ever gives what that reading gives; TestScanResult).
func ScanResult(res []byte) (*mcp.CallToolResult, bool) {
	var v [7][]byte
	if !ScanMembers(res, resultNames, v[:]) || v[3] != nil || v[4] != nil || v[5] != nil || v[6] != nil {
		return nil, false
	}
	out := &mcp.CallToolResult{}
	switch string(v[2]) {
	case "", "false", "null":
	case "true":
		out.IsError = true
	default:
		return nil, false
	}
	list := v[0]
	if len(list) < 2 || list[0] != '[' {
		return nil, false
	}
	for i := jsonscan.Space(list, 1); list[i] != ']'; {
		end, err := jsonscan.Value(list, i, 1)
		if err != nil {
			return nil, false
		}
		c, ok := scanContent(list[i:end])
		if !ok {
			return nil, false
		}
		out.Content = append(out.Content, c)
		i = jsonscan.Space(list, end)
		if list[i] == ',' {
			i = jsonscan.Space(list, i+1)
		}
	}
	if out.Content == nil {
		out.Content = []mcp.Content{}
	}
	if s := v[1]; len(s) > 0 && string(s) != "null" {
		raw := append(json.RawMessage(nil), s...)
		out.RawStructuredContent, out.StructuredContent = raw, raw
	}
	return out, true
}

// scanContent reads one content item of a known type, kept raw.
func scanContent(item []byte) (RawContent, bool) {
	var v [2][]byte
	if !ScanMembers(item, contentNames, v[:]) {
		return RawContent{}, false
	}
	typ, ok := PlainString(v[0])
	if !ok || !knownContent[typ] {
		return RawContent{}, false
	}
	c := RawContent{Raw: append(json.RawMessage(nil), item...)}
	c.Type = typ
	if t := v[1]; t != nil && string(t) != "null" {
		if len(t) == 0 || t[0] != '"' {
			return RawContent{}, false
		}
		if text, ok := PlainString(t); ok {
			c.Text = text
		} else if json.Unmarshal(t, &c.Text) != nil {
			return RawContent{}, false
		}
	}
	return c, true
}

// AppendContent appends a result's content array, items relayed raw as the
// upstream wrote them, the others as encoding/json writes them.
func AppendContent(b []byte, content []mcp.Content) ([]byte, error) {
	b = append(b, '[')
	for i, c := range content {
		if i > 0 {
			b = append(b, ',')
		}
		if r, ok := c.(RawContent); ok {
			b = append(b, r.Raw...)
			continue
		}
		m, err := json.Marshal(c)
		if err != nil {
			return b, err
		}
		b = append(b, m...)
	}
	return append(b, ']'), nil
}
