//go:build e2e

package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/planlock/planlock/internal/authn"
	"github.com/planlock/planlock/internal/testkit/oauthtest"
	"github.com/planlock/planlock/internal/testkit/peers"
)

func TestServeOAuth(t *testing.T) {
	as := oauthtest.New(t)
	as.AddClient(oauthtest.Client{ID: "ci-agent", Secret: "s3cret"})
	base, state, log := oauthServe(t, as)
	now := time.Now()
	jwtFor := func(sub string, aud string, exp time.Time) string {
		return as.Issue(t, oauthtest.Token{Subject: sub, Audience: []string{aud}, IssuedAt: now.Add(-2 * time.Hour), Expiry: exp})
	}
	hour := now.Add(time.Hour)
	metadata := `resource_metadata="` + base + `/.well-known/oauth-protected-resource"`

	cases := []struct {
		name, plan, token string
		status            int
		challenge         string
	}{
		{"no credentials", "refund", "", 401, "Bearer " + metadata},
		{"valid JWT, its plan", "refund", jwtFor("alice", base, hour), 200, ""},
		{"valid JWT, another plan", "deploy", jwtFor("alice", base, hour), 404, ""},
		{"JWT bound to the other plan", "deploy", jwtFor("bob", base, hour), 200, ""},
		{"JWT of an unmapped subject", "refund", jwtFor("mallory", base, hour), 404, ""},
		{"expired JWT", "refund", jwtFor("alice", base, now.Add(-time.Hour)), 401, "Bearer " + metadata + `, error="invalid_token"`},
		{"JWT for another resource", "refund", jwtFor("alice", "https://other.example.com", hour), 401, "Bearer " + metadata + `, error="invalid_token"`},
		{"JWT of another issuer", "refund", as.Issue(t, oauthtest.Token{Subject: "alice", Audience: []string{base}, Issuer: "https://evil.example.com"}), 401, "Bearer " + metadata + `, error="invalid_token"`},
		{"ID token (typ JWT) for the resource", "refund", as.Issue(t, oauthtest.Token{Subject: "alice", Audience: []string{base}, Type: "JWT", Expiry: hour}), 401, "Bearer " + metadata + `, error="invalid_token"`},
		{"token without a typ header", "refund", as.Issue(t, oauthtest.Token{Subject: "alice", Audience: []string{base}, Type: oauthtest.NoType, Expiry: hour}), 401, "Bearer " + metadata + `, error="invalid_token"`},
		{"static token, its plan", "deploy", "static-deploy-token", 200, ""},
		{"static token, another plan", "refund", "static-deploy-token", 404, ""},
		{"unknown static token", "refund", "guessed-token", 401, "Bearer " + metadata},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := initialize(t, base+"/mcp/"+c.plan, c.token)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d\n%s", resp.StatusCode, c.status, log.String())
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != c.challenge {
				t.Fatalf("WWW-Authenticate %q, want %q", got, c.challenge)
			}
		})
	}

	t.Run("protected resource metadata", func(t *testing.T) {
		resp, err := http.Get(base + "/.well-known/oauth-protected-resource")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var md authn.ResourceMetadata
		if err := json.NewDecoder(resp.Body).Decode(&md); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v", resp.Status, err)
		}
		if md.Resource != base || len(md.AuthorizationServers) != 1 || md.AuthorizationServers[0] != as.Issuer() {
			t.Fatalf("metadata %+v", md)
		}
	})

	t.Run("mapping edited while serving", func(t *testing.T) {
		bob := jwtFor("bob", base, hour)
		if code := initialize(t, base+"/mcp/refund", bob).StatusCode; code != 404 {
			t.Fatalf("bob on refund before the edit: %d", code)
		}
		mapping := filepath.Join(filepath.Dir(state), "oauth-plans.json")
		if err := os.WriteFile(mapping, []byte(`{"alice": ["refund"], "bob": ["deploy", "refund"], "ci-agent": ["refund"]}`), 0o600); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for initialize(t, base+"/mcp/refund", bob).StatusCode != 200 {
			if time.Now().After(deadline) {
				t.Fatalf("bob never reached refund after the mapping was edited:\n%s", log.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	// The official SDK client, given only its client credentials, finds
	// the authorization server from the 401 and calls the tool.
	t.Run("SDK client discovers OAuth on its own", func(t *testing.T) {
		if testing.Short() {
			t.Skip("runs node")
		}
		peers.Node(t)
		issued := as.TokensIssued()
		tr := peers.RunAgent(t, peers.Target{URL: base + "/mcp/refund",
			OAuth: &peers.OAuthClient{Issuer: as.Issuer(), ClientID: "ci-agent", ClientSecret: "s3cret"}},
			peers.Script{Steps: []peers.Step{peers.CallTool("whoami", map[string]any{})}})
		if !tr.Connect.OK || tr.Step(t, "0").Text != "upstream reached" {
			t.Fatalf("transcript:\n%s\nserver log:\n%s", tr, log.String())
		}
		if as.TokensIssued() != issued+1 {
			t.Fatalf("tokens issued: %d, want 1", as.TokensIssued()-issued)
		}
		// The audit log names the caller the token proved. State
		// directories are named for the signed path (refund.hcl-<digest>),
		// not the plan's label.
		logs, err := filepath.Glob(filepath.Join(state, "refund.hcl-*", "audit.jsonl"))
		if err != nil || len(logs) != 1 {
			t.Fatalf("refund plan's audit logs: %v %v", logs, err)
		}
		b, err := os.ReadFile(logs[0])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(`"caller":"jwt:ci-agent"`)) {
			t.Fatalf("no audit record of the refund plan names jwt:ci-agent:\n%s", b)
		}
	})
}

// --oauth-token-type replaces the accepted typ headers: with JWT and none
// given, an ID-token-shaped JWT and a token without typ are accepted and an
// at+jwt token no longer is.
func TestServeOAuthTokenTypes(t *testing.T) {
	as := oauthtest.New(t)
	base, _, log := oauthServe(t, as, "--oauth-token-type", "JWT", "--oauth-token-type", "none")
	hour := time.Now().Add(time.Hour)
	for _, c := range []struct {
		name, typ string
		status    int
	}{
		{"typ JWT", "JWT", 200},
		{"typ application/jwt", "application/jwt", 200},
		{"no typ", oauthtest.NoType, 200},
		{"typ at+jwt, not configured", "at+jwt", 401},
	} {
		t.Run(c.name, func(t *testing.T) {
			tok := as.Issue(t, oauthtest.Token{Subject: "alice", Audience: []string{base}, Type: c.typ, Expiry: hour})
			if got := initialize(t, base+"/mcp/refund", tok).StatusCode; got != c.status {
				t.Fatalf("status %d, want %d\n%s", got, c.status, log.String())
			}
		})
	}
}
