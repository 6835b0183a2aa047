package canonjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMarshal(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"b": [1.0, {"y": 2, "x": "<&>"}], "a": 30.0}`, `{"a":30,"b":[1,{"x":"<&>","y":2}]}`},
		{`[1e2, 0.10, -0, "é"]`, `[100,0.1,0,"é"]`},
		{`null`, `null`},
	} {
		got, err := Marshal(decode(t, tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("Marshal(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []any{json.Number("1e999999"), json.Number("01"), struct{}{}} {
		if _, err := Marshal(bad); err == nil {
			t.Errorf("Marshal(%v) accepted it", bad)
		}
	}
}

func TestWriteCapped(t *testing.T) {
	var b bytes.Buffer
	err := Write(&b, []any{strings.Repeat("x", 100), "y"}, 10)
	if !errors.Is(err, ErrCapped) || b.Len() > 20 {
		t.Fatalf("Write with a limit: %v, %d bytes", err, b.Len())
	}
}

func TestEqual(t *testing.T) {
	if !Equal(decode(t, `{"a":[30]}`), decode(t, `{"a":[30.0]}`)) || Equal(json.Number("30"), "30") {
		t.Fatal("Equal compares numbers by value and nothing else")
	}
}
