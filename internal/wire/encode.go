package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// ToolCallParams is a tools/call's params object, with the arguments as
// they were counted and recorded.
func ToolCallParams(tool string, args json.RawMessage) json.RawMessage {
	b := make([]byte, 0, len(tool)+len(args)+32)
	b = append(b, `{"name":`...)
	b = appendString(b, tool)
	b = append(b, `,"arguments":`...)
	b = append(b, args...)
	return append(b, '}')
}

// RequestLine is the JSON-RPC request line of id, method and params,
// params copied as they are unless they span lines: a newline inside would
// end the line early, so such params are compacted (which also checks
// them).
func RequestLine(id int64, method string, params json.RawMessage) ([]byte, error) {
	b := make([]byte, 0, 64+len(method)+len(params))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"method":`...)
	if plainMethod(method) {
		b = append(append(append(b, '"'), method...), '"')
	} else {
		m, err := json.Marshal(method)
		if err != nil {
			return nil, fmt.Errorf("encode method: %w", err)
		}
		b = append(b, m...)
	}
	if len(params) > 0 {
		b = append(b, `,"params":`...)
		if bytes.IndexByte(params, '\n') < 0 {
			b = append(b, params...)
		} else {
			var cb bytes.Buffer
			if err := json.Compact(&cb, params); err != nil {
				return nil, fmt.Errorf("params: %w", err)
			}
			b = append(b, cb.Bytes()...)
		}
	}
	return append(b, "}\n"...), nil
}

// plainMethod reports whether method needs no escaping in JSON, as every
// MCP method name (letters, digits, "/", "_", "-", ".").
func plainMethod(method string) bool {
	for i := 0; i < len(method); i++ {
		c := method[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '/' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// appendString appends s as a JSON string: as it is when it needs no
// escape (every MCP tool name), else as encoding/json writes it (Go's
// quoting is not JSON: \x02).
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			m, _ := json.Marshal(s) // a string always encodes
			return append(b, m...)
		}
	}
	return append(append(append(b, '"'), s...), '"')
}
