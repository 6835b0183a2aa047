package proxy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestRelayResultRefusesUnrelayedTypes: every spelling encoding/json (and
// so mcp-go's parser) reads as a resultType other than complete is refused;
// a complete result is relayed without the multi-round fields.
func TestRelayResultRefusesUnrelayedTypes(t *testing.T) {
	const content = `"content":[{"type":"text","text":"x"}]`
	for _, tt := range []struct {
		name, res string
		refused   string // "" when relayed
	}{
		{"input_required", `{"resultType":"input_required","inputRequests":{"a":{"method":"roots/list"}}}`, "input_required"},
		{"task", `{"resultType":"task","task":{"taskId":"t"}}`, "task"},
		{"key in other case", `{"ResultType":"input_required",` + content + `}`, "input_required"},
		{"escaped key", `{"result\u0054ype":"task",` + content + `}`, "task"},
		{"value in other case", `{"resultType":"INPUT_REQUIRED",` + content + `}`, "INPUT_REQUIRED"},
		{"escaped value", `{"resultType":"input\u005frequired",` + content + `}`, "input_required"},
		{"object", `{"resultType":{},` + content + `}`, "{}"},
		{"array", `{"resultType":["complete"],` + content + `}`, `["complete"]`},
		{"false", `{"resultType":false,` + content + `}`, "false"},
		{"complete", `{"resultType":"complete",` + content + `,"inputRequests":{"a":{"method":"roots/list"}},"requestState":"s"}`, ""},
		{"empty", `{"resultType":"",` + content + `}`, ""},
		{"null", `{"resultType":null,` + content + `}`, ""},
		{"absent with state", `{` + content + `,"requestState":"s"}`, ""},
		{"plain", `{` + content + `}`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := relayResult(json.RawMessage(tt.res))
			var un *unrelayedResult
			if tt.refused != "" {
				if !errors.As(err, &un) || un.resultType != tt.refused {
					t.Fatalf("relayResult = %+v, %v; want refused as %q", r, err, tt.refused)
				}
				if strings.Contains(un.Error(), "\n") {
					t.Errorf("the reason is not one line: %q", un.Error())
				}
				return
			}
			if err != nil {
				t.Fatalf("relayResult: %v", err)
			}
			b, err := appendToolResult(nil, r)
			if err != nil {
				t.Fatal(err)
			}
			if s := string(b); strings.Contains(s, "inputRequests") || strings.Contains(s, "requestState") || strings.Contains(s, "resultType") || !strings.Contains(s, `"text":"x"`) {
				t.Errorf("relayed %s", s)
			}
		})
	}
}
