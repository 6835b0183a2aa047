//go:build e2e

package e2e

import (
	"net/http"
	"path/filepath"
	"testing"

	"github.com/planlock/planlock/internal/testkit/peers"
)

// frontPlan allows the test upstream's echo, slow and flood.
const frontPlan = `
plan "front" {
  goal  = "the HTTP front"
  order = "any"
  step "echo" {
    tool      = "echo"
    max_calls = 1000000
    arg "message" { max_length = 100 }
  }
  step "slow" {
    tool      = "slow"
    max_calls = 1000
    arg "ms" { max = 60000 }
  }
  step "flood" {
    tool      = "flood"
    max_calls = 1000
  }
}`

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// rawDo sends one request to the proxy; headers are set when not empty.
func rawDo(t *testing.T, method, url, token, session, origin, body string) (int, string, http.Header) {
	t.Helper()
	return peers.RawHTTP(t, method, url, token, session, origin, body)
}

// TestCLIAllowOrigin: the planlock binary admits an --allow-origin origin
// and refuses another.
func TestCLIAllowOrigin(t *testing.T) {
	dir := t.TempDir()
	plan := writePlan(t, frontPlan)
	url := startLogged(t, nil, `on (http://\S+/mcp)`, planlockBin, "proxy", "--plan", plan, "--insecure-skip-verify",
		"--state", filepath.Join(dir, "state"), "--listen", "127.0.0.1:0", "--allow-origin", "https://app.example", "--", testUpstreamBin)
	for origin, want := range map[string]int{"https://app.example": http.StatusOK, "https://evil.example": http.StatusForbidden, "": http.StatusOK} {
		if code, body, _ := rawDo(t, http.MethodPost, url, "", "", origin, initBody); code != want {
			t.Errorf("Origin %q: HTTP %d, want %d: %s", origin, code, want, body)
		}
	}
}
