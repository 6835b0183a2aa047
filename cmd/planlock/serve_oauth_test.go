package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/urfave/cli/v2"

	"github.com/planlock/planlock/internal/authn"
	"github.com/planlock/planlock/internal/testkit/oauthtest"
	"github.com/planlock/planlock/internal/testkit/peers"
)

// oauthServe runs planlock serve with static tokens and JWTs of the
// stand-in authorization server in front of two plans over one HTTP
// upstream, and returns its base URL and state directory.
func oauthServe(t *testing.T, as *oauthtest.Server, extra ...string) (base, state string, log *peers.SyncBuffer) {
	t.Helper()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	up := server.NewMCPServer("upstream", "1.0.0")
	up.AddTool(mcp.NewTool("whoami"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("upstream reached"), nil
	})
	ups := httptest.NewServer(server.NewStreamableHTTPServer(up, server.WithStateLess(true)))
	t.Cleanup(ups.Close)

	dir := t.TempDir()
	plans := filepath.Join(dir, "plans")
	state = filepath.Join(dir, "state")
	write := func(p, s string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"refund", "deploy"} {
		write(filepath.Join(plans, name+".hcl"), `plan "`+name+`" {
  goal  = "say who I am"
  order = "any"
  upstream {
    url = "`+ups.URL+`/mcp"
  }
  step "who" {
    tool      = "whoami"
    max_calls = 5
  }
}
`)
	}
	write(filepath.Join(dir, "tokens.txt"), authn.HashToken("static-deploy-token")+" ci-bot deploy\n")
	write(filepath.Join(dir, "oauth-plans.json"), `{"alice": ["refund"], "bob": ["deploy"], "ci-agent": ["refund"]}`)

	// The mapping comes from the environment, as every flag's can.
	t.Setenv("PLANLOCK_OAUTH_PLANS", filepath.Join(dir, "oauth-plans.json"))
	log = &peers.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		done <- run(ctx, append([]string{"planlock", "serve", "--insecure-skip-verify",
			"--plans", plans, "--state", state, "--listen", "127.0.0.1:0",
			"--tokens", filepath.Join(dir, "tokens.txt"),
			"--oauth-issuer", as.Issuer(),
		}, extra...), streams{in: strings.NewReader(""), out: io.Discard, err: log})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Errorf("planlock serve did not stop")
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if m := servingAt.FindStringSubmatch(log.String()); m != nil {
			base = m[1]
			if resp, err := http.Get(base + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return base, state, log
				}
			}
		}
		select {
		case code := <-done:
			t.Fatalf("planlock serve exited %d:\n%s", code, log.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("planlock serve not ready:\n%s", log.String())
	return
}

var servingAt = regexp.MustCompile(`serving plans of .* at (http://[0-9.:]+)/mcp/<plan>`)

// initialize posts an MCP initialize request with the bearer token.
func initialize(t *testing.T, url, token string) *http.Response {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func TestServeOAuthFlagErrors(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	dir := t.TempDir()
	plansFile := filepath.Join(dir, "oauth-plans.json")
	if err := os.WriteFile(plansFile, []byte(`{"alice": ["refund"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"planlock", "serve", "--insecure-skip-verify", "--plans", dir, "--state", filepath.Join(dir, "state"), "--listen", "127.0.0.1:0"}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no authentication at all", nil, "give --tokens, --oauth-issuer or both"},
		{"OAuth flag without an issuer", []string{"--tokens", plansFile, "--oauth-plans", plansFile}, "--oauth-plans needs --oauth-issuer"},
		{"issuer without a plan mapping", []string{"--oauth-issuer", "https://sso.example.com"}, "needs --oauth-plans"},
		{"http issuer", []string{"--oauth-issuer", "http://sso.example.com", "--oauth-plans", plansFile}, "must be https"},
		{"public URL over plain http off loopback", []string{"--oauth-issuer", "https://sso.example.com", "--oauth-plans", plansFile,
			"--public-url", "http://planlock.example.com"}, "--public-url"},
		{"bad mapping file", []string{"--oauth-issuer", "https://sso.example.com", "--oauth-plans", filepath.Join(dir, "missing.json")}, "--oauth-plans"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var errb peers.SyncBuffer
			code := run(context.Background(), append(append([]string{}, base...), c.args...),
				streams{in: strings.NewReader(""), out: io.Discard, err: &errb})
			if code == 0 || !strings.Contains(errb.String(), c.want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant an error containing %q", code, errb.String(), c.want)
			}
		})
	}
}

func TestOAuthOptionsBuild(t *testing.T) {
	plans := filepath.Join(t.TempDir(), "plans.json")
	if err := os.WriteFile(plans, []byte(`{"planlock:refund": ["refund"], "planlock:deploy": ["deploy"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	cases := []struct {
		name                 string
		o                    oauthOptions
		resource, md, scopes string
	}{
		{"defaults from the listen address", oauthOptions{Issuer: "https://sso.example.com", PlansClaim: "sub", PlansFile: plans},
			"http://127.0.0.1:8080", "http://127.0.0.1:8080/.well-known/oauth-protected-resource", ""},
		{"scopes from the mapping", oauthOptions{Issuer: "https://sso.example.com", PlansClaim: "scope", PlansFile: plans, PublicURL: "https://planlock.example.com"},
			"https://planlock.example.com", "https://planlock.example.com/.well-known/oauth-protected-resource", "planlock:deploy planlock:refund"},
		{"scopes given", oauthOptions{Issuer: "https://sso.example.com", PlansClaim: "scope", PlansFile: plans, PublicURL: "https://planlock.example.com",
			Scopes: *cli.NewStringSlice("mcp")}, "https://planlock.example.com", "https://planlock.example.com/.well-known/oauth-protected-resource", "mcp"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := c.o.build(addr)
			if err != nil {
				t.Fatal(err)
			}
			if f.md.Resource != c.resource || f.md.URL() != c.md || strings.Join(f.md.ScopesSupported, " ") != c.scopes {
				t.Fatalf("metadata %+v (url %s)", f.md, f.md.URL())
			}
			routes := f.routes()
			if _, ok := routes[f.md.Path()]; !ok || len(routes) != 1 {
				t.Fatalf("routes %v", routes)
			}
			if got := f.challenge(nil, errors.New("expired")); got != `Bearer resource_metadata="`+c.md+`", error="invalid_token"` {
				t.Fatalf("challenge %s", got)
			}
		})
	}
	// A fixed audience (an authorization server that ignores RFC 8707) is
	// what tokens must carry; the metadata still names planlock's URL.
	as := oauthtest.New(t)
	o := oauthOptions{Issuer: as.Issuer(), PlansClaim: "sub", PlansFile: plans, Audience: "api://planlock", PublicURL: "https://planlock.example.com"}
	f, err := o.build(addr)
	if err != nil {
		t.Fatal(err)
	}
	if f.md.Resource != "https://planlock.example.com" {
		t.Fatalf("resource %s", f.md.Resource)
	}
	for aud, ok := range map[string]bool{"api://planlock": true, "https://planlock.example.com": false} {
		_, err := f.auth.Verify(context.Background(), as.Issue(t, oauthtest.Token{Subject: "x", Audience: []string{aud}}))
		if (err == nil) != ok {
			t.Errorf("aud %s: %v", aud, err)
		}
	}
}
