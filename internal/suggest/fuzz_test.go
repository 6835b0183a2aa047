package suggest

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzSuggest learns from arbitrary calls: Suggest either refuses with a
// clean error (never an internal one) or returns a plan that parses, passes
// its own tests (Suggest checks that) and is no wider than what was seen.
func FuzzSuggest(f *testing.F) {
	f.Add("get_order", `{"id":"1"}`, "get_order", `{"id":"2"}`, uint8(0))
	f.Add("a", `{"n":1.5,"s":"x\ny"}`, "b", `{"n":-3,"s":"${x}"}`, uint8(50))
	f.Add("refund_custοmer", `{"o":{"k":[1,null,true]}}`, "refund_customer", `{"o":"%{"}`, uint8(7))
	f.Add("t", `{"x":1e5}`, "t", `{"x":"1e5"}`, uint8(100))
	f.Fuzz(func(t *testing.T, tool1, args1, tool2, args2 string, margin uint8) {
		var calls []Call
		for i, c := range []struct{ tool, args string }{{tool1, args1}, {tool2, args2}, {tool1, args2}, {tool2, args1}} {
			d := json.NewDecoder(bytes.NewReader([]byte(c.args)))
			d.UseNumber()
			var m map[string]any
			if d.Decode(&m) != nil || m == nil {
				continue
			}
			calls = append(calls, Call{Line: i + 1, Run: "r" + string(rune('0'+i%2)), Tool: c.tool, Args: m})
		}
		if len(calls) == 0 {
			return
		}
		res, err := Suggest(calls, Options{Name: "fuzz", MarginPercent: int(margin), Source: tool1})
		if err != nil {
			if strings.Contains(err.Error(), "internal error") {
				t.Fatal(err)
			}
			return
		}
		assertNoWider(t, res.Parsed, calls)
	})
}
