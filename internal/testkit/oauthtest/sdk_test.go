//go:build e2e

package oauthtest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/planlock/planlock/internal/authn"
	"github.com/planlock/planlock/internal/testkit/oauthtest"
	"github.com/planlock/planlock/internal/testkit/peers"
)

// protected is a resource server the way planlock serve is one: every
// request to /mcp/<plan> needs a JWT for this resource whose identity may
// use the plan; a 401 points at the protected resource metadata.
type protected struct {
	auth *authn.JWTAuthenticator
	md   authn.ResourceMetadata
	mcp  http.Handler

	mu       sync.Mutex
	statuses []int
	subjects []string
}

func (p *protected) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status := p.serve(w, r)
	p.mu.Lock()
	p.statuses = append(p.statuses, status)
	p.mu.Unlock()
}

func (p *protected) serve(w http.ResponseWriter, r *http.Request) int {
	if r.URL.Path == p.md.Path() {
		p.md.Handler().ServeHTTP(w, r)
		return 200
	}
	plan, ok := strings.CutPrefix(r.URL.Path, "/mcp/")
	if !ok {
		http.NotFound(w, r)
		return 404
	}
	id, err := p.auth.Authenticate(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", p.md.Challenge(err))
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return 401
	}
	if !id.MayUse(plan) {
		w.Header().Set("WWW-Authenticate", p.md.ForbiddenChallenge())
		http.Error(w, "forbidden", http.StatusForbidden)
		return 403
	}
	p.mu.Lock()
	p.subjects = append(p.subjects, id.Subject)
	p.mu.Unlock()
	p.mcp.ServeHTTP(w, r)
	return 200
}

func startProtected(t *testing.T, as *oauthtest.Server, plans map[string][]string) (*protected, string) {
	t.Helper()
	s := server.NewMCPServer("protected", "1.0.0")
	s.AddTool(mcp.NewTool("whoami"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("hello"), nil
	})
	p := &protected{}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	var err error
	p.auth, err = authn.NewJWT(authn.JWTConfig{Issuer: as.Issuer(), Audience: srv.URL, PlansClaim: "sub", Plans: plans})
	if err != nil {
		t.Fatal(err)
	}
	p.md, err = authn.NewResourceMetadata(srv.URL, as.Issuer(), nil)
	if err != nil {
		t.Fatal(err)
	}
	p.mcp = server.NewStreamableHTTPServer(s, server.WithStateLess(true))
	return p, srv.URL
}

// TestSDKClientDiscoversAndAuthenticates drives the official TypeScript SDK
// client's own OAuth support: from the 401 it finds the protected resource
// metadata, then the authorization server's metadata, gets a token for the
// resource it is told (RFC 8707) and calls the tool with it.
func TestSDKClientDiscoversAndAuthenticates(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node")
	}
	peers.Node(t)
	as := oauthtest.New(t)
	as.AddClient(oauthtest.Client{ID: "ci-agent", Secret: "s3cret"})
	as.SetUser(oauthtest.User{Subject: "alice"})
	p, url := startProtected(t, as, map[string][]string{"ci-agent": {"refund"}, "alice": {"refund"}})
	script := peers.Script{Steps: []peers.Step{peers.CallTool("whoami", map[string]any{})}}

	cases := []struct {
		name    string
		oauth   peers.OAuthClient
		plan    string
		wantOK  bool
		subject string
	}{
		{"client credentials", peers.OAuthClient{Issuer: as.Issuer(), ClientID: "ci-agent", ClientSecret: "s3cret"}, "refund", true, "jwt:ci-agent"},
		{"authorization code with PKCE and registration", peers.OAuthClient{Issuer: as.Issuer(), Code: true}, "refund", true, "jwt:alice"},
		{"wrong client secret", peers.OAuthClient{Issuer: as.Issuer(), ClientID: "ci-agent", ClientSecret: "guess"}, "refund", false, ""},
		{"plan the identity is not bound to", peers.OAuthClient{Issuer: as.Issuer(), ClientID: "ci-agent", ClientSecret: "s3cret"}, "deploy", false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p.mu.Lock()
			p.subjects, p.statuses = nil, nil
			p.mu.Unlock()
			issued := as.TokensIssued()
			tr := peers.RunAgent(t, peers.Target{URL: url + "/mcp/" + c.plan, OAuth: &c.oauth}, script)
			p.mu.Lock()
			defer p.mu.Unlock()
			if !c.wantOK {
				if tr.Connect.OK {
					t.Fatalf("connected; transcript:\n%s", tr)
				}
				t.Logf("refused: %+v (statuses %v)", tr.Connect.Error, p.statuses)
				if len(p.subjects) != 0 {
					t.Fatalf("requests reached the MCP server as %v", p.subjects)
				}
				return
			}
			if !tr.Connect.OK || !tr.Step(t, "0").OK || tr.Step(t, "0").Text != "hello" {
				t.Fatalf("transcript:\n%s", tr)
			}
			if as.TokensIssued() != issued+1 {
				t.Fatalf("tokens issued: %d, want 1", as.TokensIssued()-issued)
			}
			if len(p.statuses) == 0 || p.statuses[0] != 401 {
				t.Fatalf("the first request was not refused with 401 (statuses %v): the client did not discover on its own", p.statuses)
			}
			for _, s := range p.subjects {
				if s != c.subject {
					t.Fatalf("subjects %v, want %s", p.subjects, c.subject)
				}
			}
		})
	}
}
