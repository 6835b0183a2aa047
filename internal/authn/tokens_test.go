package authn_test

import (
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/planlock/planlock/internal/authn"
)

func TestParseTokens(t *testing.T) {
	h := authn.HashToken("s3cret")
	tests := []struct {
		name, file, err string
		want            map[string][]string // subject → plans
	}{
		{name: "one line", file: h + " ci-bot refund\n", want: map[string][]string{"token:ci-bot": {"refund"}}},
		{name: "comments, blanks, several plans", file: "# team\n\n" + h + "  alice@example.com\trefund,triage\n" + authn.HashToken("other") + " ops *\n",
			want: map[string][]string{"token:alice@example.com": {"refund", "triage"}, "token:ops": {"*"}}},
		{name: "empty file", file: "", want: map[string][]string{}},
		{name: "token instead of hash", file: "s3cret ci-bot refund\n", err: "line 1: the token hash must be sha256:<64 hex digits>"},
		{name: "short hash", file: "sha256:abcd ci-bot refund\n", err: "line 1: the token hash"},
		{name: "missing plans", file: h + " ci-bot\n", err: "line 1: want"},
		{name: "bad subject", file: h + " ci/bot refund\n", err: `line 1: subject "ci/bot"`},
		{name: "bad plan", file: "#\n" + h + " ci-bot refund,../x\n", err: `line 2: plan "../x"`},
		{name: "empty plan", file: h + " ci-bot refund,\n", err: `line 1: plan ""`},
		{name: "duplicate", file: h + " a refund\n" + h + " b refund\n", err: "line 2: the same token hash is listed twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := authn.ParseTokens([]byte(tc.file))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][]string{}
			for _, id := range m {
				got[id.Subject] = id.Plans
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for s, plans := range tc.want {
				if !slices.Equal(got[s], plans) {
					t.Fatalf("%s: plans %v, want %v", s, got[s], plans)
				}
			}
		})
	}
}

func writeTokens(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

func TestTokensAuthenticate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeTokens(t, path, authn.HashToken("tok-a")+" alice refund\n")
	toks, err := authn.LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, header string
		subject      string // "" means ErrNoCredentials
	}{
		{"known token", "Bearer tok-a", "token:alice"},
		{"scheme in any case", "bearer tok-a", "token:alice"},
		{"no header", "", ""},
		{"unknown token", "Bearer tok-b", ""},
		{"the hash is not the token", "Bearer " + authn.HashToken("tok-a"), ""},
		{"basic auth", "Basic dG9rLWE=", ""},
		{"empty bearer", "Bearer ", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/mcp/refund", nil)
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
			id, err := toks.Authenticate(r)
			if tc.subject == "" {
				if !errors.Is(err, authn.ErrNoCredentials) {
					t.Fatalf("err = %v, want ErrNoCredentials", err)
				}
				return
			}
			if err != nil || id.Subject != tc.subject || !id.MayUse("refund") || id.MayUse("triage") {
				t.Fatalf("got %+v, %v; want %s bound to refund only", id, err, tc.subject)
			}
		})
	}
	r := httptest.NewRequest("POST", "/mcp/refund", nil)
	r.Header.Add("Authorization", "Bearer tok-a")
	r.Header.Add("Authorization", "Bearer tok-a")
	if _, err := toks.Authenticate(r); !errors.Is(err, authn.ErrNoCredentials) {
		t.Fatalf("two Authorization headers: err = %v, want ErrNoCredentials", err)
	}
}

func TestTokensReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeTokens(t, path, authn.HashToken("tok-a")+" alice refund\n")
	toks, err := authn.LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	who := func(tok string) string {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		id, err := toks.Authenticate(r)
		if err != nil {
			return ""
		}
		return id.Subject + ":" + strings.Join(id.Plans, ",")
	}
	if changed, err := toks.Reload(); changed || err != nil {
		t.Fatalf("unchanged file: changed %v, err %v", changed, err)
	}

	// New content is acted on once it looks the same twice in a row.
	firstLook := func(what string) {
		t.Helper()
		if changed, err := toks.Reload(); changed || err != nil {
			t.Fatalf("%s, first look: changed %v, err %v; want nothing yet", what, changed, err)
		}
	}
	// A new file replaces every token: tok-a is gone, tok-b is in.
	writeTokens(t, path, authn.HashToken("tok-b")+" bob refund,triage\n")
	firstLook("changed file")
	if changed, err := toks.Reload(); !changed || err != nil {
		t.Fatalf("changed file: changed %v, err %v", changed, err)
	}
	if who("tok-a") != "" || who("tok-b") != "token:bob:refund,triage" {
		t.Fatalf("after reload: tok-a %q, tok-b %q", who("tok-a"), who("tok-b"))
	}

	// A bad file keeps the tokens read before and says so once.
	writeTokens(t, path, "tok-c carol refund\n")
	firstLook("bad file")
	_, err = toks.Reload()
	if err == nil || !strings.Contains(err.Error(), "keeping the 1 tokens read before") {
		t.Fatalf("bad file: err = %v", err)
	}
	if who("tok-b") != "token:bob:refund,triage" {
		t.Fatal("a bad file dropped the tokens in use")
	}
	if changed, err := toks.Reload(); changed || err != nil {
		t.Fatalf("the same bad file again: changed %v, err %v (want silence)", changed, err)
	}

	// A missing file keeps them too.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := toks.Reload(); err == nil {
		t.Fatal("missing file: no error")
	}
	if who("tok-b") == "" {
		t.Fatal("a missing file dropped the tokens in use")
	}
	writeTokens(t, path, authn.HashToken("tok-c")+" carol *\n")
	firstLook("file back")
	if changed, err := toks.Reload(); !changed || err != nil || who("tok-c") != "token:carol:*" {
		t.Fatalf("file back: changed %v, err %v, tok-c %q", changed, err, who("tok-c"))
	}
}

func TestLoadTokensRefusesBadFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := authn.LoadTokens(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing file loaded")
	}
	path := filepath.Join(dir, "tokens")
	writeTokens(t, path, "plain-token alice refund\n")
	if _, err := authn.LoadTokens(path); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("bad file: err = %v", err)
	}
}

// A token file rewritten in place, in two halves, is never acted on half
// written: the first half cuts alice's line inside its plan list so that it
// names the plan "refund" (wider than "refund-readonly"), and that is never
// served; the whole new file is, once it stays as it is.
func TestTokensReloadIgnoresTornWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	old := authn.HashToken("tok-a") + " alice refund-readonly\n"
	writeTokens(t, path, old)
	toks, err := authn.LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	plansOf := func(tok string) string {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		id, err := toks.Authenticate(r)
		if err != nil {
			return ""
		}
		return strings.Join(id.Plans, ",")
	}
	whole := authn.HashToken("tok-a") + " alice refund-readonly,triage\n" + authn.HashToken("tok-b") + " bob deploy\n"
	cut := strings.Index(whole, "refund") + len("refund")
	tests := []struct {
		name       string
		first      string // the half written first, in place
		wantBefore string // alice's plans after the reload that sees it
	}{
		{"cut inside the plan list", whole[:cut], "refund-readonly"},
		{"cut after a comma", whole[:cut+len("-readonly,")], "refund-readonly"},
		{"cut inside the next line", whole[:len(whole)-8], "refund-readonly"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			writeTokens(t, path, old)
			for range 3 {
				if _, err := toks.Reload(); err != nil {
					t.Fatal(err)
				}
			}
			if got := plansOf("tok-a"); got != "refund-readonly" {
				t.Fatalf("start: alice has %q", got)
			}
			writeTokens(t, path, tt.first)
			_, _ = toks.Reload()
			if got := plansOf("tok-a"); got != tt.wantBefore {
				t.Fatalf("half-written file acted on: alice has %q, want %q", got, tt.wantBefore)
			}
			writeTokens(t, path, whole)
			_, _ = toks.Reload()
			if got := plansOf("tok-a"); got != tt.wantBefore {
				t.Fatalf("file acted on at its first look: alice has %q", got)
			}
			if changed, err := toks.Reload(); !changed || err != nil {
				t.Fatalf("stable whole file: changed %v, err %v", changed, err)
			}
			if a, b := plansOf("tok-a"), plansOf("tok-b"); a != "refund-readonly,triage" || b != "deploy" {
				t.Fatalf("whole file: alice %q, bob %q", a, b)
			}
		})
	}
}
