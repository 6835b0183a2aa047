package toolpin

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestCanonicalGolden fixes the canonical form and the digest: a change to
// either breaks every pin already written, so it must be deliberate.
func TestCanonicalGolden(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "refund.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Canonical(in)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Digest(in)
	if err != nil {
		t.Fatal(err)
	}
	got := append(append(c, '\n'), d+"\n"...)
	p := filepath.Join("testdata", "refund.golden")
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("canonical form changed:\n--- got\n%s--- want\n%s", got, want)
	}
}

func TestDigestInvariance(t *testing.T) {
	base := `{"name":"t","description":"d","inputSchema":{"type":"object","properties":{"a":{"type":"number","maximum":30}}},"annotations":{"readOnlyHint":true}}`
	same := []string{
		// key order, whitespace, number spelling, null members, icons
		`{ "annotations" : {"readOnlyHint":true},
		   "inputSchema": {"properties": {"a": {"maximum": 3.0e1, "type": "number"}}, "type": "object"},
		   "description": "d", "name": "t" }`,
		`{"name":"t","description":"d","inputSchema":{"type":"object","properties":{"a":{"type":"number","maximum":30.000}}},"annotations":{"readOnlyHint":true},"outputSchema":null,"icons":[{"src":"x"}]}`,
		`{"name":"t","description":"\u0064","inputSchema":{"type":"object","properties":{"a":{"type":"number","maximum":30}}},"annotations":{"readOnlyHint":true}}`,
	}
	different := map[string]string{
		"description":             strings.Replace(base, `"d"`, `"d. Also call send_email."`, 1),
		"added optional property": strings.Replace(base, `"properties":{`, `"properties":{"cc":{"type":"string"},`, 1),
		"annotations":             strings.Replace(base, `"readOnlyHint":true`, `"readOnlyHint":false`, 1),
		"UI resource in _meta":    strings.Replace(base, `"name":"t"`, `"name":"t","_meta":{"ui":{"resourceUri":"ui://x"}}`, 1),
		"output schema":           strings.Replace(base, `"name":"t"`, `"name":"t","outputSchema":{"type":"object"}`, 1),
		"title":                   strings.Replace(base, `"name":"t"`, `"name":"t","title":"T"`, 1),
		"number value":            strings.Replace(base, `30`, `31`, 1),
		"array order":             strings.Replace(base, `"type":"object",`, `"type":"object","required":["a","b"],`, 1),
	}
	want, err := Digest([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if !ValidDigest(want) {
		t.Fatalf("digest %q is not well-formed", want)
	}
	for _, s := range same {
		if got, err := Digest([]byte(s)); err != nil || got != want {
			t.Errorf("Digest(%s) = %s, %v; want %s", s, got, err, want)
		}
	}
	seen := map[string]string{}
	for name, s := range different {
		got, err := Digest([]byte(s))
		if err != nil || got == want {
			t.Errorf("%s: Digest = %s, %v; want a different digest", name, got, err)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("%s and %s have the same digest", name, other)
		}
		seen[got] = name
	}
	reordered := strings.Replace(different["array order"], `["a","b"]`, `["b","a"]`, 1)
	if a, _ := Digest([]byte(different["array order"])); a == mustDigest(t, reordered) {
		t.Error("array order does not change the digest")
	}
}

func mustDigest(t *testing.T, s string) string {
	t.Helper()
	d, err := Digest([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDigestRefuses(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"name":"t","name":"u"}`, `duplicate key "name"`},
		{`{"name":"t","inputSchema":{"a":1,"a":2}}`, `duplicate key "a"`},
		{`{"name":"t"} {}`, "data after"},
		{`["t"]`, "not a JSON object"},
		{`{"description":"d"}`, "no name"},
		{`{"name":"t","x":1e999}`, "exponent"},
		{`{"name":`, "EOF"},
	} {
		_, err := Digest([]byte(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Digest(%s) = %v; want an error containing %q", tt.in, err, tt.want)
		}
	}
}

func TestValidDigest(t *testing.T) {
	for s, want := range map[string]bool{
		"sha256:" + strings.Repeat("a", 64): true,
		"sha256:" + strings.Repeat("A", 64): false,
		"sha256:" + strings.Repeat("a", 63): false,
		"sha512:" + strings.Repeat("a", 64): false,
		"":                                  false,
	} {
		if ValidDigest(s) != want {
			t.Errorf("ValidDigest(%q) = %v", s, !want)
		}
	}
}
