package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/planlock/planlock/internal/authn"
)

// TestModernRequestsThroughServe: behind planlock serve, as behind proxy
// --listen, a request of protocol 2026-07-28 is served whatever
// Mcp-Session-Id it carries (another identity's included), with no session
// in the answer; its GET and DELETE get 405; a legacy request naming an
// unknown or another identity's session keeps its 404.
func TestModernRequestsThroughServe(t *testing.T) {
	plans := t.TempDir()
	writePlan(t, plans, "alpha.hcl", planText("alpha", "first"))
	toks := tokenFile(t, map[string]string{"tok-a": "a alpha", "tok-b": "b alpha"})
	r := start(t, Config{PlansDir: plans, Authenticators: []authn.Authenticator{toks}})
	url := r.url + "/mcp/alpha"
	_, sidB, _ := initialize(t, url, "tok-b")
	const forged = "mcp-session-0b7c3a9e-6a53-4a8e-9d1f-2f4a1c9b8e70"
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	do := func(method, version, sid, body string) (int, string, http.Header) {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer tok-a")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if version != "" {
			req.Header.Set("Mcp-Protocol-Version", version)
			req.Header.Set("Mcp-Method", "tools/list")
		}
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{` + meta + `}}`
	for _, tt := range []struct {
		name                    string
		method, version, sid, b string
		want                    int
	}{
		{"modern, no session", http.MethodPost, "2026-07-28", "", list, 200},
		{"modern, unknown session", http.MethodPost, "2026-07-28", forged, list, 200},
		{"modern, another identity's session", http.MethodPost, "2026-07-28", sidB, list, 200},
		{"modern GET", http.MethodGet, "2026-07-28", "", "", 405},
		{"modern DELETE of another identity's session", http.MethodDelete, "2026-07-28", sidB, "", 405},
		{"legacy, unknown session", http.MethodPost, "", forged, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, 404},
		{"legacy, another identity's session", http.MethodPost, "", sidB, `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`, 404},
	} {
		code, body, h := do(tt.method, tt.version, tt.sid, tt.b)
		if code != tt.want {
			t.Errorf("%s: HTTP %d %q, want %d", tt.name, code, body, tt.want)
		}
		if code == 200 && (!strings.Contains(body, `"name":"echo"`) || h.Get("Mcp-Session-Id") != "") {
			t.Errorf("%s: answered %q with session %q", tt.name, body, h.Get("Mcp-Session-Id"))
		}
		if code == 405 && h.Get("Allow") != http.MethodPost {
			t.Errorf("%s: Allow %q", tt.name, h.Get("Allow"))
		}
	}
	// B's session is still B's.
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer tok-b")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sidB)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("B's own session after A's modern DELETE naming it: HTTP %d", resp.StatusCode)
	}
}
