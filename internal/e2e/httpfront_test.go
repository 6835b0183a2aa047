//go:build e2e

package e2e

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
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
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if session != "" {
		req.Header.Set(server.HeaderKeySessionID, session)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		// A GET stream that was accepted: its status is the answer.
		return resp.StatusCode, "", resp.Header
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header
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
