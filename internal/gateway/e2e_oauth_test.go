//go:build e2e

package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/planlock/planlock/internal/authn"
	"github.com/planlock/planlock/internal/testkit/oauthtest"
	"github.com/planlock/planlock/internal/testkit/peers"
)

// oauthFront is the OAuth resource server part of the gateway, made once
// the listener's URL (the resource identifier) is known.
type oauthFront struct {
	auth atomic.Pointer[authn.JWTAuthenticator]
	md   atomic.Pointer[authn.ResourceMetadata]
}

func (f *oauthFront) Authenticate(r *http.Request) (authn.Identity, error) {
	return f.auth.Load().Authenticate(r)
}

// TestEndToEndWithOAuth: three plans and two kinds of upstream (the
// reference server over stdio, the Go test upstream over HTTP and stdio)
// behind one gateway, a static bearer token and OAuth identities side by
// side, the official TypeScript SDK client as the agent. One OAuth agent
// gets its token on its own (401 → protected resource metadata →
// authorization server metadata → client credentials); an expired token, a
// token for another resource and a token bound to another plan are
// refused; the audit chains name every caller.
func TestEndToEndWithOAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node and upstream processes")
	}
	bins, err := peers.BuildCommands(t.TempDir(), peers.PkgTestUpstream)
	if err != nil {
		t.Fatal(err)
	}
	up := bins[peers.PkgTestUpstream]
	upURL := peers.StartHTTP(t, up)
	quote := func(argv []string) string {
		b, _ := json.Marshal(argv)
		return string(b)
	}
	plans := t.TempDir()
	for name, upstream := range map[string]string{
		"docs":    "command = " + quote(peers.EverythingStdio(t)),
		"ops":     fmt.Sprintf("url = %q", upURL),
		"billing": "command = " + quote([]string{up}),
	} {
		writePlan(t, plans, name+".hcl", fmt.Sprintf(`plan %q {
  goal  = "echo"
  order = "any"
  upstream {
    %s
  }
  step "say" {
    tool      = "echo"
    max_calls = 5
    arg "message" { max_length = 20 }
  }
}
`, name, upstream))
	}

	as := oauthtest.New(t)
	toks := tokenFile(t, map[string]string{"alice-token": "alice docs"})
	front := &oauthFront{}
	state := t.TempDir()
	r := start(t, Config{PlansDir: plans, StateDir: state,
		Authenticators: []authn.Authenticator{toks, front},
		Challenge:      func(_ *http.Request, err error) string { return front.md.Load().Challenge(err) },
		Routes: map[string]http.Handler{authn.ResourceMetadataWellKnown: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			front.md.Load().Handler().ServeHTTP(w, r)
		})},
	})
	md, err := authn.NewResourceMetadata(r.url, as.Issuer(), nil)
	if err != nil {
		t.Fatal(err)
	}
	jwtAuth, err := authn.NewJWT(authn.JWTConfig{Issuer: as.Issuer(), Audience: r.url,
		PlansClaim: "groups", Plans: map[string][]string{"billing-team": {"billing"}, "sre": {"ops"}}})
	if err != nil {
		t.Fatal(err)
	}
	as.AddClient(oauthtest.Client{ID: "billing-agent", Secret: "s3cret", Claims: map[string]any{"groups": []string{"billing-team"}}})
	front.md.Store(&md)
	front.auth.Store(jwtAuth)

	now := time.Now()
	jwtOf := func(sub, group, aud string, exp time.Time) string {
		return as.Issue(t, oauthtest.Token{Subject: sub, Audience: []string{aud}, IssuedAt: now.Add(-2 * time.Hour), Expiry: exp,
			Claims: map[string]any{"groups": []string{group}}})
	}
	echo := peers.Script{Steps: []peers.Step{peers.CallTool("echo", map[string]any{"message": "hi"})}}
	sdkOAuth := &peers.OAuthClient{Issuer: as.Issuer(), ClientID: "billing-agent", ClientSecret: "s3cret"}
	cases := []struct {
		who, plan string
		target    peers.Target
		want      bool
	}{
		{"token:alice", "docs", peers.HTTP(r.url+"/mcp/docs", "alice-token"), true},
		{"token:alice", "ops", peers.HTTP(r.url+"/mcp/ops", "alice-token"), false},
		{"jwt:billing-agent (SDK OAuth)", "billing", peers.Target{URL: r.url + "/mcp/billing", OAuth: sdkOAuth}, true},
		{"jwt:billing-agent (SDK OAuth)", "docs", peers.Target{URL: r.url + "/mcp/docs", OAuth: sdkOAuth}, false},
		{"jwt:sam", "ops", peers.HTTP(r.url+"/mcp/ops", jwtOf("sam", "sre", r.url, now.Add(time.Hour))), true},
		{"jwt:sam, expired", "ops", peers.HTTP(r.url+"/mcp/ops", jwtOf("sam", "sre", r.url, now.Add(-time.Hour))), false},
		{"jwt:sam, another resource", "ops", peers.HTTP(r.url+"/mcp/ops", jwtOf("sam", "sre", "https://elsewhere.example.com", now.Add(time.Hour))), false},
	}
	for _, c := range cases {
		tr := peers.RunAgent(t, c.target, echo)
		if tr.Connect.OK != c.want {
			t.Errorf("%s → %s: connected %v, want %v\n%s", c.who, c.plan, tr.Connect.OK, c.want, tr)
			continue
		}
		if c.want {
			if res := tr.Step(t, "0"); !res.OK || res.IsError || !strings.Contains(res.Text, "hi") {
				t.Errorf("%s → %s: echo answered %+v", c.who, c.plan, res)
			}
		}
	}
	// Refusals as a client without OAuth support sees them.
	for _, c := range []struct {
		name, plan, token string
		status            int
		challenge         string
	}{
		{"no credentials", "ops", "", 401, `Bearer resource_metadata="` + md.URL() + `"`},
		{"expired", "ops", jwtOf("sam", "sre", r.url, now.Add(-time.Hour)), 401, `Bearer resource_metadata="` + md.URL() + `", error="invalid_token"`},
		{"another plan", "billing", jwtOf("sam", "sre", r.url, now.Add(time.Hour)), 404, ""},
	} {
		code, _, h := initialize(t, r.url+"/mcp/"+c.plan, c.token)
		if code != c.status || h.Get("WWW-Authenticate") != c.challenge {
			t.Errorf("%s: %d %q, want %d %q", c.name, code, h.Get("WWW-Authenticate"), c.status, c.challenge)
		}
	}
	r.stop()

	want := map[string][]string{
		"docs":    {"allow echo token:alice"},
		"ops":     {"allow echo jwt:sam"},
		"billing": {"allow echo jwt:billing-agent"},
	}
	for plan, decisions := range want {
		if got := auditDecisions(t, filepath.Join(stateOf(state, plans, plan), "audit.jsonl")); !slices.Equal(got, decisions) {
			t.Errorf("%s audit decisions %v, want %v", plan, got, decisions)
		}
	}
}
