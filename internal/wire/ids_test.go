package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"testing"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/server"
)

// TestPlainID: the ids a fast lane echoes as written are those mcp-go's
// server writes back the same: strings without escapes and short integers.
func TestPlainID(t *testing.T) {
	for _, tt := range []struct {
		id   string
		want bool
	}{
		{`"abc"`, true}, {`""`, true}, {`7`, true}, {`0`, true}, {`-12`, true}, {`123456789012345`, true},
		{`"a\"b"`, false}, {`"\u0061"`, false}, {`1234567890123456`, false}, {`007`, false}, {`-0`, false},
		{`1.0`, false}, {`1e3`, false}, {`-`, false}, {``, false}, {`null`, false}, {`true`, false}, {`{}`, false},
	} {
		if got := PlainID(json.RawMessage(tt.id)); got != tt.want {
			t.Errorf("PlainID(%s) = %v, want %v", tt.id, got, tt.want)
		}
	}
}

// TestFloatsFit: a number that does not fit a float64 makes mcp-go's
// server refuse the call, so the lane leaves it to the server.
func TestFloatsFit(t *testing.T) {
	for _, tt := range []struct {
		args string
		want bool
	}{
		{`{"a":1,"b":[2.5,-3e10],"c":"1e999"}`, true},
		{`{"a":1e308}`, true},
		{`{"a":1e309}`, false},
		{`{"a":[-1e400]}`, false},
		{`{"s":"x\"1e999"}`, true},
	} {
		if got := FloatsFit([]byte(tt.args)); got != tt.want {
			t.Errorf("FloatsFit(%s) = %v, want %v", tt.args, got, tt.want)
		}
	}
}

// FuzzRequestLine: the request line is one line of JSON that encoding/json
// reads back as the id, method and params given, and a tools/call's params
// read back as its name and arguments.
func FuzzRequestLine(f *testing.F) {
	f.Add(int64(1), "tools/call", `{"name":"echo","arguments":{"message":"hi"}}`, "echo", `{"a":1}`)
	f.Add(int64(math.MaxInt64), "a\"b\n", "{\n\"x\": [1,\n2]}", "na\u2028me\"", "{\n}")
	f.Add(int64(-5), "", "", "", `[]`)
	f.Fuzz(func(t *testing.T, id int64, method, params, tool, args string) {
		if !utf8.ValidString(method) || !utf8.ValidString(tool) {
			return // names are text; encoding/json would replace the bytes
		}
		line, err := RequestLine(id, method, json.RawMessage(params))
		if params != "" && !json.Valid([]byte(params)) {
			if err == nil && bytes.IndexByte([]byte(params), '\n') >= 0 {
				t.Fatalf("invalid params spanning lines accepted: %q", line)
			}
			return
		}
		if err != nil {
			t.Fatalf("RequestLine(%d, %q, %q): %v", id, method, params, err)
		}
		if bytes.Count(line, []byte("\n")) != 1 || line[len(line)-1] != '\n' {
			t.Fatalf("not one line: %q", line)
		}
		var m struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      int64           `json:"id"`
			Method  string          `json:"method"`
			Params  json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if m.JSONRPC != "2.0" || m.ID != id || m.Method != method {
			t.Fatalf("%q read back as %+v", line, m)
		}
		if params != "" && !equalJSON(t, m.Params, []byte(params)) {
			t.Fatalf("params %s read back as %s", params, m.Params)
		}
		if !json.Valid([]byte(args)) {
			return
		}
		var c struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		p := ToolCallParams(tool, json.RawMessage(args))
		if err := json.Unmarshal(p, &c); err != nil || c.Name != tool || !equalJSON(t, c.Arguments, []byte(args)) {
			t.Fatalf("ToolCallParams(%q, %s) = %s: read back %+v, %v", tool, args, p, c, err)
		}
	})
}

func equalJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y bytes.Buffer
	if json.Compact(&x, a) != nil || json.Compact(&y, b) != nil {
		return false
	}
	return bytes.Equal(x.Bytes(), y.Bytes())
}

// TestToolCallParamsIsJSON: a tool name that needs escapes (a plan may
// name any tool) is written as JSON, never with Go's quoting.
func TestToolCallParamsIsJSON(t *testing.T) {
	for _, name := range []string{"echo", "a\x02b", `q"uote`, `back\slash`, "déjà", "\U000e0001tag", "line\u2028sep", "<&>"} {
		p := ToolCallParams(name, json.RawMessage(`{"k":[1]}`))
		var c struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal(p, &c); err != nil || c.Name != name || string(c.Arguments) != `{"k":[1]}` {
			t.Errorf("ToolCallParams(%q) = %s: read back %+v, %v", name, p, c, err)
		}
	}
}

// TestServerIDAsTheServerAnswers: ServerID is the id mcp-go's server puts
// in its answer to a request of that id (a ping), for plain ids and
// every other spelling it reads; one it does not read is refused.
func TestServerIDAsTheServerAnswers(t *testing.T) {
	srv := server.NewMCPServer("t", "1")
	for _, id := range []string{`1`, `"a"`, `1.0`, `-0`, `"\u0041"`, `12345678901234567890`, `1.5`, `1e3`, `-7`, `""`, `"a\"b"`} {
		got, ok := ServerID(json.RawMessage(id))
		if !ok {
			t.Errorf("ServerID(%s) refused an id the server reads", id)
			continue
		}
		b, err := json.Marshal(srv.HandleMessage(context.Background(), json.RawMessage(`{"jsonrpc":"2.0","id":`+id+`,"method":"ping"}`)))
		if err != nil {
			t.Fatal(err)
		}
		var answer struct{ ID json.RawMessage }
		if err := json.Unmarshal(b, &answer); err != nil {
			t.Fatal(err)
		}
		if string(got) != string(answer.ID) {
			t.Errorf("ServerID(%s) = %s, the server answers id %s", id, got, answer.ID)
		}
	}
	for _, id := range []string{`null`, `{"x":1}`, `[1]`, `true`, `007`} {
		if got, ok := ServerID(json.RawMessage(id)); ok {
			t.Errorf("ServerID(%s) = %s, want it refused", id, got)
		}
	}
}
