package main

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/planlock/planlock/internal/authn"
)

// oauthOptions are planlock serve's OAuth 2.1 resource server flags.
type oauthOptions struct {
	PublicURL, Issuer, Audience, JWKSURL, PlansClaim, PlansFile string
	Scopes, TokenTypes                                          cli.StringSlice
}

func (o *oauthOptions) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "public-url", Usage: "planlock's `URL` as clients reach it (behind a TLS proxy: its https URL); the OAuth resource identifier (default: http://<listen address>)", Destination: &o.PublicURL},
		&cli.StringFlag{Name: "oauth-issuer", Usage: "accept JWT access tokens issued by the authorization server `URL` (its exact issuer identifier)", Destination: &o.Issuer},
		&cli.StringFlag{Name: "oauth-audience", Usage: "the `VALUE` a token's aud must contain, for an authorization server that ignores the resource clients ask for (default: --public-url)", Destination: &o.Audience},
		&cli.StringFlag{Name: "oauth-jwks-url", Usage: "the issuer's JWK Set `URL` (default: jwks_uri of the issuer's metadata)", Destination: &o.JWKSURL},
		&cli.StringFlag{Name: "oauth-plans-claim", Value: "sub", Usage: "the token `CLAIM` mapped to plans: sub, a claim listing groups or roles, or scope", Destination: &o.PlansClaim},
		&cli.StringFlag{Name: "oauth-plans", Usage: "JSON `FILE` mapping values of --oauth-plans-claim to plan names: {\"payments\": [\"refund\"]} (read again when it changes)", TakesFile: true, Destination: &o.PlansFile},
		&cli.StringSliceFlag{Name: "oauth-token-type", Usage: "a JOSE typ `TYPE` access tokens may carry (repeatable; default at+jwt, RFC 9068; none: no typ header)", Destination: &o.TokenTypes},
		&cli.StringSliceFlag{Name: "oauth-scope", Usage: "a `SCOPE` clients should ask for, published in the protected resource metadata (repeatable; default with --oauth-plans-claim scope: the --oauth-plans keys)", Destination: &o.Scopes},
	}
}

// oauthFront is what the OAuth flags add to the gateway: the JWT
// authenticator, the protected resource metadata route, and the
// WWW-Authenticate challenge pointing at it.
type oauthFront struct {
	auth  *authn.JWTAuthenticator
	md    authn.ResourceMetadata
	plans *authn.PlanMapFile // read again when it changes
}

// oauthGiven is the first --oauth-* flag given, "" when none is.
func (o *serveOptions) oauthGiven() string {
	for _, f := range o.oauthOptions.flags() {
		if n := f.Names()[0]; strings.HasPrefix(n, "oauth-") && o.given(n) {
			return n
		}
	}
	return ""
}

// build checks the flags and makes the front; addr is the listener's.
func (o *oauthOptions) build(addr net.Addr) (*oauthFront, error) {
	if o.Issuer == "" {
		return nil, nil
	}
	if o.PlansFile == "" {
		return nil, usageErrorf("--oauth-issuer needs --oauth-plans: without it no token is bound to any plan")
	}
	file, plans, err := authn.OpenPlanMap(o.PlansFile)
	if err != nil {
		return nil, failf("--oauth-plans: %v", err)
	}
	public := o.PublicURL
	if public == "" {
		public = "http://" + addr.String()
	}
	audience := o.Audience
	if audience == "" {
		audience = public
	}
	scopes := o.Scopes.Value()
	if len(scopes) == 0 && o.PlansClaim == "scope" {
		for k := range plans {
			scopes = append(scopes, k)
		}
		slices.Sort(scopes)
	}
	// The metadata names planlock by the URL clients reach it at (they
	// check it against that URL, and ask for tokens for it, RFC 8707);
	// an authorization server with a fixed audience sets --oauth-audience.
	md, err := authn.NewResourceMetadata(public, o.Issuer, scopes)
	if err != nil {
		return nil, usageErrorf("--public-url: %v", err)
	}
	a, err := authn.NewJWT(authn.JWTConfig{
		Issuer: o.Issuer, Audience: audience, JWKSURL: o.JWKSURL,
		PlansClaim: o.PlansClaim, Plans: plans, TokenTypes: o.TokenTypes.Value(),
	})
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	return &oauthFront{auth: a, md: md, plans: file}, nil
}

// routes serve the metadata without authentication, at its RFC 9728 path.
func (f *oauthFront) routes() map[string]http.Handler {
	return map[string]http.Handler{f.md.Path(): f.md.Handler()}
}

func (f *oauthFront) challenge(r *http.Request, err error) string {
	return f.md.Challenge(err)
}

func (f *oauthFront) String() string {
	return fmt.Sprintf("OAuth resource %s, tokens of %s (metadata at %s)", f.md.Resource, f.md.AuthorizationServers[0], f.md.URL())
}
