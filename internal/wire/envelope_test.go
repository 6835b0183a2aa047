package wire

import (
	"bytes"
	"encoding/json"
	"testing"
)

// envelopeByJSON is what encoding/json reads of the routed members.
type envelopeByJSON struct {
	JSONRPC json.RawMessage `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

func TestScanEnvelope(t *testing.T) {
	tests := []struct {
		in     string
		ok     bool
		method string
		id     string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}` + "\n", true, `"tools/call"`, `1`},
		{` { "id" : "a" , "method":"ping" } `, true, `"ping"`, `"a"`},
		{`{}`, true, ``, ``},
		{`{"x":[1,2.5e-3,true,false,null,{"y":"\u00e9\n"}],"id":-0}`, true, ``, `-0`},
		{`{"jsonrpc":"2.0","result":{"content":[]},"id":7}`, true, ``, `7`},
		// Left to encoding/json.
		{`{"method":"ping","method":"tools/call"}`, false, ``, ``},
		{`{"Method":"tools/call"}`, false, ``, ``},
		{`{"METHOD":"tools/call","method":"ping"}`, false, ``, ``},
		{`{"\u006dethod":"tools/call"}`, false, ``, ``},
		{`{"paramſ":{}}`, false, ``, ``},
		// Not one JSON object.
		{`[1,2]`, false, ``, ``},
		{`"str"`, false, ``, ``},
		{``, false, ``, ``},
		{`{"id":1}{}`, false, ``, ``},
		{`{"id":01}`, false, ``, ``},
		{`{"id":1,}`, false, ``, ``},
		{`{"id":"a` + "\x01" + `"}`, false, ``, ``},
		{`{"id":"\x"}`, false, ``, ``},
		{`{"id":"\u12"}`, false, ``, ``},
		{`{"id":1.}`, false, ``, ``},
		{`{"id":1e}`, false, ``, ``},
		{`{"id":tru}`, false, ``, ``},
		{`{"id":[1 2]}`, false, ``, ``},
		{`{"id":{"a" 1}}`, false, ``, ``},
		{`{"id":1`, false, ``, ``},
	}
	for _, tt := range tests {
		env, ok := ScanEnvelope([]byte(tt.in))
		if ok != tt.ok {
			t.Errorf("%q: ok %v, want %v", tt.in, ok, tt.ok)
			continue
		}
		if ok && (string(env.Method) != tt.method || string(env.ID) != tt.id) {
			t.Errorf("%q: method %s id %s, want %s %s", tt.in, env.Method, env.ID, tt.method, tt.id)
		}
		if ok && !json.Valid([]byte(tt.in)) {
			t.Errorf("%q: scanned as plain, but it is not JSON", tt.in)
		}
	}
}

// FuzzEnvelope: whenever the scanner says a text is a plain object,
// encoding/json agrees that it is JSON and reads the same members.
func FuzzEnvelope(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`,
		`{"jsonrpc":"2.0","id":"x","result":{"content":[{"type":"text","text":"a\"b"}],"isError":true}}`,
		`{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"no"}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`,
		`{"Id":1}`, `{"id":1,"id":2}`, `[{}]`, `{"a":[[[]]],"b":-1.5E+3}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		env, ok := ScanEnvelope(b)
		if !ok {
			return
		}
		var want envelopeByJSON
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("%q: scanned as a plain object, encoding/json: %v", b, err)
		}
		for _, m := range []struct {
			name      string
			got, want []byte
		}{
			{"jsonrpc", env.JSONRPC, want.JSONRPC}, {"id", env.ID, want.ID}, {"method", env.Method, want.Method},
			{"params", env.Params, want.Params}, {"result", env.Result, want.Result}, {"error", env.Err, want.Error},
		} {
			if !bytes.Equal(m.got, m.want) {
				t.Fatalf("%q: %s %q, encoding/json reads %q", b, m.name, m.got, m.want)
			}
		}
	})
}

// FuzzScanResult: a result ScanResult reads is read the same by
// encoding/json (DecodeResult): the same answer to the client, the same
// texts for the audit record.
func FuzzScanResult(f *testing.F) {
	for _, s := range []string{
		`{"content":[{"type":"text","text":"hello"}]}`,
		`{"content":[{"type":"text","text":"a\"b\u00e9"},{"type":"image","data":"AA==","mimeType":"image/png"}],"isError":true}`,
		`{"content":[],"structuredContent":{"a":1},"isError":false}`,
		`{"content":[{"type":"resource","resource":{"uri":"x","text":"y"}}],"structuredContent":null}`,
		`{"content":[{"type":"text","text":null}]}`, `{"content":[{"type":"text","text":1}]}`,
		`{"content":null}`, `{"Content":[]}`, `{"content":[{"type":"te\u0078t","text":"x"}]}`,
		`{"content":[{"type":"text","text":"x"}],"_meta":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := ScanResult(b)
		if !ok {
			return
		}
		want, err := DecodeResult(b)
		if err != nil {
			t.Fatalf("%q: scanned, but encoding/json: %v", b, err)
		}
		gb, err1 := json.Marshal(got)
		wb, err2 := json.Marshal(want)
		if err1 != nil || err2 != nil || !bytes.Equal(gb, wb) {
			t.Fatalf("%q: answers differ:\nscan: %s %v\njson: %s %v", b, gb, err1, wb, err2)
		}
		if len(got.Content) != len(want.Content) {
			t.Fatalf("%q: %d items, encoding/json %d", b, len(got.Content), len(want.Content))
		}
		for i := range got.Content {
			gt, gok := ContentText(got.Content[i])
			wt, wok := ContentText(want.Content[i])
			if gt != wt || gok != wok {
				t.Fatalf("%q: item %d text %q %v, encoding/json %q %v", b, i, gt, gok, wt, wok)
			}
		}
		var a, w []byte
		if a, err = AppendToolResult(nil, got); err != nil {
			t.Fatal(err)
		}
		if w, err = AppendToolResult(nil, want); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, w) {
			t.Fatalf("%q: fast-lane answers differ: %s vs %s", b, a, w)
		}
	})
}
