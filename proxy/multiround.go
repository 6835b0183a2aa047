package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/internal/oneline"
)

// Multi-round requests (protocol 2026-07-28). An upstream may answer a
// tools/call, resources/read or prompts/get with a result that is not the
// call's outcome: resultType "input_required" (inputRequests the client is
// to run: elicitation, sampling, roots) or "task" (the tasks extension),
// and a client retries with inputResponses and requestState. Until the
// plan can say which input requests a step may make, the gate relays only
// complete results: any other result type ends the call with an error, and
// nothing of its input requests reaches the client. A client's request
// carrying inputResponses or requestState answers nothing planlock asked,
// so it is refused before it is decided or counted. Every answer to a
// client passes through relayResult (tools) or checkResultType (reads and
// gets), whichever path the request took (server, stdio or HTTP fast lane).

// unrelayedResult is an upstream result of a type the gate does not relay.
type unrelayedResult struct{ resultType string }

func (e *unrelayedResult) Error() string {
	switch e.resultType {
	case string(mcp.ResultTypeInputRequired):
		return `the upstream asked for input (resultType "input_required"), which this plan does not allow: planlock relays no input request, and none was shown`
	case "task":
		return `the upstream returned a task (resultType "task"), which this plan does not allow: planlock relays no task result`
	}
	return fmt.Sprintf("the upstream returned a result of type %s, which this plan does not allow: planlock relays only complete results", oneline.Of(e.resultType, 60))
}

// checkResultType reads an upstream result's resultType as encoding/json
// (and so mcp-go's parser) reads it, names matched without regard to case:
// nil when it is absent, null, "" or "complete", else an *unrelayedResult. A
// result that is not JSON passes: the parser's error follows.
func checkResultType(res []byte) error {
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
		return &unrelayedResult{resultType: string(rt)}
	}
	if mcp.ResultType(s).IsComplete() { // "" reads as complete, as null does
		return nil
	}
	return &unrelayedResult{resultType: s}
}

// roundTripRefusal is the reason a client's request carrying a multi-round
// retry's fields is refused; "" when it carries none.
func roundTripRefusal(method string, rt mcp.MultiRoundTripParams) string {
	if rt.InputResponses == nil && rt.RequestState == "" {
		return ""
	}
	return method + " carries inputResponses or requestState, but planlock asked for no input (it relays no input request): the retry was not forwarded and not counted"
}
