//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// refundProxy runs the planlock binary over stdio in front of the refund
// server with the refund plan in any order (so that every call reaches the
// argument checks) and returns the client and the upstream's calls log.
func refundProxy(t *testing.T, extra ...string) (*rawClient, string) {
	t.Helper()
	dir := t.TempDir()
	callsLog := filepath.Join(dir, "calls.jsonl")
	hash := filepath.Join(dir, "hash")
	if err := os.WriteFile(hash, []byte(goodHash+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"proxy", "--plan", writePlan(t, anyOrder(refundPlan)), "--insecure-skip-verify",
		"--state", filepath.Join(dir, "state")}, extra...)
	args = append(args, "--", refundBin, "--calls-log", callsLog, "--hash-file", hash)
	return startRaw(t, args...), callsLog
}

// loggedCalls reads an upstream calls log: tool and raw arguments per call.
func loggedCalls(t *testing.T, path string) []struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
} {
	t.Helper()
	var out []struct {
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
	}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return out
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 256<<20)
	for sc.Scan() {
		var r struct {
			Tool      string          `json:"tool"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("calls log: %v", err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func nested(depth int, leaf string) string {
	return strings.Repeat("[", depth) + leaf + strings.Repeat("]", depth)
}

func manyKeys(n int) string {
	var b strings.Builder
	b.WriteString(`{"order_id":"4711"`)
	for i := range n {
		fmt.Fprintf(&b, `,"k%d":%d`, i, i)
	}
	b.WriteString("}")
	return b.String()
}

// TestInjectionStyleCallsAreBlocked sends through the real proxy binary the
// calls a confused or prompt-injected agent might make. Each is answered
// with one precise reason (a blocked tool result or a JSON-RPC error), the
// proxy keeps serving, and the upstream's own calls log shows that none was
// forwarded.
func TestInjectionStyleCallsAreBlocked(t *testing.T) {
	c, callsLog := refundProxy(t)
	refund := func(amount string) string {
		return `{"order_id":"4711","amount":` + amount + `,"currency":"EUR"}`
	}
	tests := []struct {
		name, tool, args string
		want             string // the whole answer, or a prefix when it ends with "…"
	}{
		// Smuggled JSON stays inside the string value it was put in.
		{"smuggled JSON in a value", "refund_customer", `{"order_id":"4711\", \"amount\": 300","amount":10,"currency":"EUR"}`,
			`blocked by plan "refund-4711": step "refund": argument "order_id" = "4711\", \"amount\": 300", want "4711"`},
		{"smuggled JSON in a look-up", "get_order", `{"order_id":"4711\",\"order_id\":\"4712"}`,
			`blocked by plan "refund-4711": step "lookup": argument "order_id" = "4711\",\"order_id\":\"4712", want "4711"`},
		// Look-alike tool names are other tools: neither planned nor offered.
		{"Cyrillic o in the tool name", "get_\u043erder", `{"order_id":"4711"}`, `rpc error -32602: tool 'get_оrder' not found: tool not found`},
		{"fullwidth tool name", "\uff47\uff45\uff54_order", `{"order_id":"4711"}`, `rpc error -32602: tool 'ｇｅｔ_order' not found: tool not found`},
		{"zero-width joiner in the tool name", "get\u200d_order", `{"order_id":"4711"}`, "rpc error -32602: tool 'get\u200d_order' not found: tool not found"},
		{"trailing space in the tool name", "get_order ", `{"order_id":"4711"}`, `rpc error -32602: tool 'get_order ' not found: tool not found`},
		{"upper-case tool name", "GET_ORDER", `{"order_id":"4711"}`, `rpc error -32602: tool 'GET_ORDER' not found: tool not found`},
		{"planned-but-gated tool the upstream has", "get_script_by_path", `{"path":"f/support/refund_customer"}`,
			`blocked by plan "refund-4711": tool "get_script_by_path" is not in plan "refund-4711"`},
		// Look-alike argument names are undeclared arguments.
		{"Cyrillic o in an argument name", "get_order", `{"\u043erder_id":"4711"}`,
			`blocked by plan "refund-4711": step "lookup": argument "оrder_id" is not allowed by the plan`},
		{"look-alike beside the real argument", "get_order", `{"order_id":"4711","\u043erder_id":"4712"}`,
			`blocked by plan "refund-4711": step "lookup": argument "оrder_id" is not allowed by the plan`},
		{"zero-width joiner in an argument name", "get_order", "{\"order_id\":\"4711\",\"order\u200d_id\":\"4712\"}",
			`blocked by plan "refund-4711": step "lookup": argument "order\u200d_id" is not allowed by the plan`},
		{"trailing space in an argument name", "get_order", `{"order_id":"4711","order_id ":"4712"}`,
			`blocked by plan "refund-4711": step "lookup": argument "order_id " is not allowed by the plan`},
		{"upper-case argument name", "get_order", `{"order_id":"4711","ORDER_ID":"4712"}`,
			`blocked by plan "refund-4711": step "lookup": argument "ORDER_ID" is not allowed by the plan`},
		// Numbers: only JSON numbers within the bounds, compared exactly.
		{"number as a string", "refund_customer", refund(`"30"`), `blocked by plan "refund-4711": step "refund": argument "amount" = "30", want a number`},
		{"above the maximum", "refund_customer", refund(`300`), `blocked by plan "refund-4711": step "refund": argument "amount" = 300 is above the maximum 30`},
		{"just above the maximum", "refund_customer", refund(`30.0000000000000001`),
			`blocked by plan "refund-4711": step "refund": argument "amount" = 30.0000000000000001 is above the maximum 30`},
		{"overflowing number", "refund_customer", refund(`1e400`),
			`rpc error -32600: unparsable tools/call request: json: cannot unmarshal number 1e400 into Go struct field CallToolRequest.params of type float64`},
		{"negative zero", "refund_customer", refund(`-0`), `blocked by plan "refund-4711": tool "refund_customer": arguments must be a JSON object: number -0 is a negative zero; send 0`},
		// Long numbers: refused before any exact arithmetic (a 4 MB number
		// cost about 45 s of CPU, 1e-999999 about 24 ms).
		{"4 MB number", "refund_customer", refund(`1.` + strings.Repeat("0", 4<<20) + `1`),
			`blocked by plan "refund-4711": tool "refund_customer": arguments must be a JSON object: number 1.000000000000000000…(4194307 characters) is longer than 100 characters`},
		{"101-character number", "refund_customer", refund(`1.` + strings.Repeat("0", 99)),
			`blocked by plan "refund-4711": tool "refund_customer": arguments must be a JSON object: number 1.000000000000000000…(101 characters) is longer than 100 characters`},
		{"tiny exponent", "refund_customer", refund(`1e-999999`),
			`blocked by plan "refund-4711": tool "refund_customer": arguments must be a JSON object: number 1e-999999 has an exponent beyond ±400`},
		{"tiny exponent in a nested value", "get_order", `{"order_id":"4711","x":[{"y":5e-401}]}`,
			`blocked by plan "refund-4711": tool "get_order": arguments must be a JSON object: number 5e-401 has an exponent beyond ±400`},
		{"NaN is not JSON", "refund_customer", refund(`NaN`), `rpc error -32700: Parse error`},
		// Repeated keys: parsers disagree on which value counts.
		{"repeated key, allowed value last", "refund_customer", `{"order_id":"4711","amount":300,"amount":1,"currency":"EUR"}`,
			`blocked by plan "refund-4711": tool "refund_customer": arguments must be a JSON object: key "amount" appears twice in one object`},
		{"repeated key, allowed value first", "refund_customer", `{"order_id":"4711","amount":1,"amount":300,"currency":"EUR"}`,
			`blocked by plan "refund-4711": tool "refund_customer": arguments must be a JSON object: key "amount" appears twice in one object`},
		{"repeated key through an escape", "get_order", `{"order_id":"4711","order\u005fid":"4712"}`,
			`blocked by plan "refund-4711": tool "get_order": arguments must be a JSON object: key "order_id" appears twice in one object`},
		{"invalid UTF-8", "get_order", "{\"order_id\":\"4711\xff\"}", `blocked by plan "refund-4711": tool "get_order": arguments must be a JSON object: invalid UTF-8`},
		// Lone surrogates: "\ud800" and "\udfff" are different strings to
		// the upstream but the same U+FFFD once decoded.
		{"lone high surrogate", "get_order", `{"order_id":"4711\ud800"}`,
			`blocked by plan "refund-4711": tool "get_order": arguments must be a JSON object: lone surrogate escape \ud800: not a valid UTF-16 pair`},
		{"lone low surrogate", "get_order", `{"order_id":"4711\udfff"}`,
			`blocked by plan "refund-4711": tool "get_order": arguments must be a JSON object: lone surrogate escape \udfff: not a valid UTF-16 pair`},
		{"lone surrogate in a key", "get_order", `{"order_id":"4711","\uDC00":1}`,
			`blocked by plan "refund-4711": tool "get_order": arguments must be a JSON object: lone surrogate escape \uDC00: not a valid UTF-16 pair`},
		{"look-alike key through an escaped pair", "refund_customer", `{"order_id":"4711","amount":1,"currency":"EUR","😀":1,"\ud83d\ude00":2}`,
			`blocked by plan "refund-4711": tool "refund_customer": arguments must be a JSON object: key "😀" appears twice in one object`},
		// Shapes.
		{"null arguments", "get_order", `null`, `blocked by plan "refund-4711": step "lookup": argument "order_id" is required`},
		{"no arguments", "get_order", ``, `blocked by plan "refund-4711": step "lookup": argument "order_id" is required`},
		{"arguments as an array", "get_order", `["4711"]`, `blocked by plan "refund-4711": tool "get_order": arguments must be a JSON object: got an array`},
		{"arguments as a string", "get_order", `"{\"order_id\":\"4711\"}"`, `blocked by plan "refund-4711": tool "get_order": arguments must be a JSON object: got a string`},
		{"arguments as a number", "get_order", `4711`, `blocked by plan "refund-4711": tool "get_order": arguments must be a JSON object: got a number`},
		// Size and depth.
		{"1 MB value", "get_order", `{"order_id":"` + strings.Repeat("9", 1<<20) + `"}`,
			`blocked by plan "refund-4711": step "lookup": argument "order_id" = "` + strings.Repeat("9", 79) + `…, want "4711"`},
		{"nested 100 deep", "get_order", `{"order_id":` + nested(100, `"4711"`) + `}`,
			`blocked by plan "refund-4711": tool "get_order": arguments must be a JSON object: nested deeper than 64 levels`},
		{"nested 5k deep", "get_order", `{"order_id":` + nested(5000, `"4711"`) + `}`,
			`blocked by plan "refund-4711": tool "get_order": arguments must be a JSON object: nested deeper than 64 levels`},
		{"nested 10k deep", "get_order", `{"order_id":` + nested(10000, `"4711"`) + `}`, `rpc error -32700: Parse error`},
		{"nested 100k deep", "get_order", `{"order_id":` + nested(100000, `"4711"`) + `}`, `rpc error -32700: Parse error`},
		{"5k arguments", "get_order", manyKeys(5000), `blocked by plan "refund-4711": step "lookup": argument "k0" is not allowed by the plan`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.t = t
			a := c.call(tt.tool, tt.args)
			got := a.text()
			if a.allowed() {
				t.Fatalf("allowed: %q", got)
			}
			t.Logf("%s → %.300s", tt.name, got)
			if strings.Contains(got, "\n") {
				t.Errorf("the reason is not one line: %.300q", got)
			}
			if p, ok := strings.CutSuffix(tt.want, "…"); ok {
				if !strings.HasPrefix(got, p) {
					t.Fatalf("got %.300q\nwant a prefix %q", got, p)
				}
			} else if got != tt.want {
				t.Fatalf("got  %.300q\nwant %q", got, tt.want)
			}
		})
	}
	c.t = t
	// Still serving: the planned call goes through.
	if a := c.call("get_order", `{"order_id":"4711"}`); !a.allowed() {
		t.Fatalf("after the abuse, a planned call: %s", a.text())
	}
	calls := loggedCalls(t, callsLog)
	for _, r := range calls {
		if r.Tool != "get_order" || string(r.Arguments) != `{"order_id":"4711"}` {
			t.Errorf("the upstream received %s(%s)", r.Tool, r.Arguments)
		}
	}
	if len(calls) != 1 {
		t.Fatalf("the upstream received %d calls, want only the final planned one", len(calls))
	}
}
