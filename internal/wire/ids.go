package wire

import (
	"encoding/json"
	"strconv"

	"github.com/planlock/planlock/internal/jsonscan"
)

// ServerID is a string or number id as the MCP server writes it back
// (mcp-go's HandleMessage reads it into an any: a number as a float64);
// false for any other id (null, an object, an array, a boolean), which a
// lane leaves to the server. A plain id (PlainID) comes back as written.
func ServerID(id json.RawMessage) (json.RawMessage, bool) {
	if PlainID(id) {
		return id, true
	}
	var v any
	if json.Unmarshal(id, &v) != nil {
		return nil, false
	}
	switch v.(type) {
	case string, float64:
	default:
		return nil, false
	}
	b, err := json.Marshal(v)
	return b, err == nil
}

// PlainID reports whether id is a JSON-RPC id the fast lane echoes as the
// client wrote it, because the MCP server would echo the same text: a
// string without escapes, or an integer of at most 15 digits without a
// leading zero (the server reads numbers as float64, so longer ones and
// other spellings may come back written differently).
func PlainID(id json.RawMessage) bool {
	if _, ok := PlainString(id); ok {
		return true
	}
	d := id
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 15 || (d[0] == '0' && (len(d) > 1 || len(id) > 1)) {
		return false
	}
	for _, c := range d {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// FloatsFit reports whether every number in the JSON text args fits a
// float64, as the MCP server's decode of a call's arguments requires (it
// answers anything else with an invalid-request error before any tool runs).
func FloatsFit(args []byte) bool {
	for i := 0; i < len(args); i++ {
		switch c := args[i]; {
		case c == '"':
			end, _, err := jsonscan.String(args, i)
			if err != nil {
				return false
			}
			i = end - 1
		case c == '-' || (c >= '0' && c <= '9'):
			end, err := jsonscan.Number(args, i)
			if err != nil {
				return false
			}
			if _, err := strconv.ParseFloat(string(args[i:end]), 64); err != nil {
				return false
			}
			i = end - 1
		}
	}
	return true
}
