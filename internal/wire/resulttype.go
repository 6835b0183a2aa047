package wire

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/internal/oneline"
)

// UnrelayedResult is an upstream result of a type the gate does not relay.
type UnrelayedResult struct{ ResultType string }

func (e *UnrelayedResult) Error() string {
	switch e.ResultType {
	case string(mcp.ResultTypeInputRequired):
		return `the upstream asked for input (resultType "input_required"), which this plan does not allow: planlock relays no input request, and none was shown`
	case "task":
		return `the upstream returned a task (resultType "task"), which this plan does not allow: planlock relays no task result`
	}
	return fmt.Sprintf("the upstream returned a result of type %s, which this plan does not allow: planlock relays only complete results", oneline.Of(e.ResultType, 60))
}

// CheckResultType reads an upstream result's resultType as encoding/json
// (and so mcp-go's parser) reads it, names matched without regard to case:
// nil when it is absent, null, "" or "complete", else an *UnrelayedResult. A
// result that is not JSON passes: the parser's error follows.
func CheckResultType(res []byte) error {
	var h struct {
		ResultType json.RawMessage `json:"resultType"`
	}
	if json.Unmarshal(res, &h) != nil {
		return nil
	}
	rt := bytes.TrimSpace(h.ResultType)
	if len(rt) == 0 || string(rt) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(rt, &s) != nil {
		return &UnrelayedResult{ResultType: string(rt)}
	}
	if mcp.ResultType(s).IsComplete() { // "" reads as complete, as null does
		return nil
	}
	return &UnrelayedResult{ResultType: s}
}
