// Package oauthtest is a stand-in for a real OAuth 2.1 authorization server
// (Keycloak, Okta, Entra ID...) in tests of planlock as a resource server.
// A real identity provider cannot run offline in a test, so this one serves
// the parts of one that planlock and MCP clients touch, faithfully to the
// RFCs they follow:
//
//   - authorization server metadata (RFC 8414) at
//     /.well-known/oauth-authorization-server and OpenID Connect discovery at
//     /.well-known/openid-configuration, naming the issuer exactly;
//   - a JWK Set (RFC 7517) of public signing keys, which tests rotate
//     (AddKey, Rotate, RemoveKey) and whose fetches they count;
//   - signed JWT access tokens (RFC 9068: typ at+jwt, iss, sub, aud, exp,
//     iat, jti, client_id, scope) with the claims, expiry and audience a
//     test chooses (Issue), or from the token endpoint;
//   - the token endpoint for the client_credentials grant (client_secret_basic
//     or client_secret_post) and the authorization_code grant with PKCE S256;
//   - an authorize endpoint that approves at once, as the user the test set
//     (no login page), and dynamic client registration (RFC 7591).
//
// Resource indicators (RFC 8707) are honoured as an authorization server
// that supports them does: a token's aud is the resource the client asked
// for, else the server's default audience. It has no refresh tokens, consent
// page, token revocation or introspection: planlock, a resource server that
// checks JWTs itself, uses none of them.
package oauthtest

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Client is a registered OAuth client. Tokens issued to it by the token
// endpoint carry Subject (the client id when empty) and Claims.
type Client struct {
	ID, Secret   string
	RedirectURIs []string
	Subject      string
	Claims       map[string]any
}

// User is who the authorize endpoint approves as.
type User struct {
	Subject string
	Claims  map[string]any
}

// Token is what Issue signs. Zero times mean: IssuedAt now, Expiry an hour
// after it, no nbf.
type Token struct {
	Subject   string
	Audience  []string
	IssuedAt  time.Time
	NotBefore time.Time
	Expiry    time.Time
	// Issuer overrides the server's (to forge a token of another issuer).
	Issuer string
	// KeyID signs with that key instead of the current signing key.
	KeyID  string
	Claims map[string]any
	// Type is the JOSE typ header: "" means "at+jwt" (RFC 9068), NoType
	// omits it (as many OIDC ID tokens do), anything else is sent as is.
	Type string
}

// NoType as Token.Type issues a token without a typ header.
const NoType = "-"

type key struct {
	kid       string
	alg       jose.SignatureAlgorithm
	priv      any
	withdrawn bool // no longer in the JWKS, still usable to sign
}

// Server is the stand-in authorization server.
type Server struct {
	*httptest.Server
	// DefaultAudience is the aud of tokens whose client asked for no resource.
	DefaultAudience string
	// TokenTTL is the lifetime of tokens from the token endpoint.
	TokenTTL time.Duration
	// Now is the clock tokens are issued by.
	Now func() time.Time

	mu           sync.Mutex
	keys         []key
	signing      string // kid
	clients      map[string]*Client
	user         User
	codes        map[string]authCode
	jwksFetches  int
	tokensIssued int
	n            int
}

type authCode struct {
	clientID, redirectURI, challenge, resource, scope string
	expires                                           time.Time
}

// New starts a stand-in on a loopback port with one ES256 signing key; it is
// closed when the test ends.
func New(t testing.TB) *Server {
	s := &Server{
		TokenTTL: time.Hour,
		Now:      time.Now,
		clients:  map[string]*Client{},
		codes:    map[string]authCode{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", s.metadata)
	mux.HandleFunc("GET /.well-known/openid-configuration", s.metadata)
	mux.HandleFunc("GET /jwks", s.jwks)
	mux.HandleFunc("POST /token", s.token)
	mux.HandleFunc("GET /authorize", s.authorize)
	mux.HandleFunc("POST /register", s.register)
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	s.signing = s.AddKey(t, jose.ES256)
	return s
}

// Issuer is the issuer identifier (the server's URL).
func (s *Server) Issuer() string { return s.URL }

// JWKSURL is where the JWK Set is served.
func (s *Server) JWKSURL() string { return s.URL + "/jwks" }

// AddKey generates a key for alg (RS256, ES256 or EdDSA), publishes it in
// the JWKS and returns its kid. It does not sign until Rotate or SetSigning.
func (s *Server) AddKey(t testing.TB, alg jose.SignatureAlgorithm) string {
	t.Helper()
	var priv any
	var err error
	switch alg {
	case jose.RS256, jose.PS256:
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case jose.ES256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jose.EdDSA:
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		t.Fatalf("oauthtest: no key generator for %s", alg)
	}
	if err != nil {
		t.Fatalf("oauthtest: generating a %s key: %v", alg, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	kid := fmt.Sprintf("%s-%d", strings.ToLower(string(alg)), s.n)
	s.keys = append(s.keys, key{kid: kid, alg: alg, priv: priv})
	return kid
}

// Rotate adds a key of alg and signs with it from now on; the old keys stay
// published until RemoveKey, as a real rotation overlaps them.
func (s *Server) Rotate(t testing.TB, alg jose.SignatureAlgorithm) string {
	kid := s.AddKey(t, alg)
	s.SetSigning(kid)
	return kid
}

// SetSigning makes kid the key tokens are signed with.
func (s *Server) SetSigning(kid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.signing = kid
}

// SigningKeyID is the kid tokens are signed with now.
func (s *Server) SigningKeyID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.signing
}

// RemoveKey withdraws kid from the JWKS (tokens can still be signed with it,
// to show they stop verifying).
func (s *Server) RemoveKey(kid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.keys {
		if s.keys[i].kid == kid {
			s.keys[i].withdrawn = true
		}
	}
}

// PublicJWK is the public JWK of kid as the JWKS serves it.
func (s *Server) PublicJWK(kid string) jose.JSONWebKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.keys {
		if k.kid == kid && !k.withdrawn {
			return publicJWK(k)
		}
	}
	return jose.JSONWebKey{}
}

// JWKSFetches counts GET /jwks.
func (s *Server) JWKSFetches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jwksFetches
}

// TokensIssued counts tokens the token endpoint issued.
func (s *Server) TokensIssued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokensIssued
}

// AddClient registers a client (client_credentials, or authorization code
// with its RedirectURIs).
func (s *Server) AddClient(c Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cc := c
	s.clients[c.ID] = &cc
}

// SetUser sets who the authorize endpoint approves as.
func (s *Server) SetUser(u User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.user = u
}

// Issue signs a token with the chosen claims.
func (s *Server) Issue(t testing.TB, tok Token) string {
	t.Helper()
	raw, err := s.sign(tok)
	if err != nil {
		t.Fatalf("oauthtest: %v", err)
	}
	return raw
}

// IssueRaw signs exactly the claims given (no iss, exp or aud added), with
// the current signing key: for tokens a real server would never issue.
func (s *Server) IssueRaw(t testing.TB, claims map[string]any) string {
	t.Helper()
	signer, err := s.signer(s.SigningKeyID())
	if err == nil {
		var raw string
		raw, err = jwt.Signed(signer).Claims(claims).Serialize()
		if err == nil {
			return raw
		}
	}
	t.Fatalf("oauthtest: %v", err)
	return ""
}

func (s *Server) signer(kid string) (jose.Signer, error) {
	return s.signerType(kid, "at+jwt")
}

func (s *Server) signerType(kid, typ string) (jose.Signer, error) {
	s.mu.Lock()
	var k *key
	for i := range s.keys {
		if s.keys[i].kid == kid {
			k = &s.keys[i]
		}
	}
	s.mu.Unlock()
	if k == nil {
		return nil, fmt.Errorf("no key %q", kid)
	}
	opts := &jose.SignerOptions{}
	if typ != NoType {
		opts = opts.WithType(jose.ContentType(typ))
	}
	return jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: jose.JSONWebKey{Key: k.priv, KeyID: k.kid}}, opts)
}

func (s *Server) sign(tok Token) (string, error) {
	kid := tok.KeyID
	if kid == "" {
		kid = s.SigningKeyID()
	}
	s.mu.Lock()
	s.n++
	jti := fmt.Sprintf("jti-%d", s.n)
	s.mu.Unlock()
	typ := tok.Type
	if typ == "" {
		typ = "at+jwt"
	}
	signer, err := s.signerType(kid, typ)
	if err != nil {
		return "", err
	}
	now := s.Now()
	if tok.IssuedAt.IsZero() {
		tok.IssuedAt = now
	}
	if tok.Expiry.IsZero() {
		tok.Expiry = tok.IssuedAt.Add(time.Hour)
	}
	iss := tok.Issuer
	if iss == "" {
		iss = s.Issuer()
	}
	std := jwt.Claims{
		Issuer: iss, Subject: tok.Subject, Audience: jwt.Audience(tok.Audience), ID: jti,
		IssuedAt: jwt.NewNumericDate(tok.IssuedAt), Expiry: jwt.NewNumericDate(tok.Expiry),
	}
	if !tok.NotBefore.IsZero() {
		std.NotBefore = jwt.NewNumericDate(tok.NotBefore)
	}
	b := jwt.Signed(signer).Claims(std)
	if tok.Claims != nil {
		b = b.Claims(tok.Claims)
	}
	return b.Serialize()
}

func publicJWK(k key) jose.JSONWebKey {
	var pub any
	switch p := k.priv.(type) {
	case *rsa.PrivateKey:
		pub = &p.PublicKey
	case *ecdsa.PrivateKey:
		pub = &p.PublicKey
	case ed25519.PrivateKey:
		pub = p.Public()
	}
	return jose.JSONWebKey{Key: pub, KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"}
}

func (s *Server) metadata(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                s.Issuer(),
		"authorization_endpoint":                s.URL + "/authorize",
		"token_endpoint":                        s.URL + "/token",
		"registration_endpoint":                 s.URL + "/register",
		"jwks_uri":                              s.JWKSURL(),
		"response_types_supported":              []string{"code"},
		"grant_types_supported":                 []string{"authorization_code", "client_credentials"},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post", "none"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"ES256", "RS256", "EdDSA"},
	})
}

func (s *Server) jwks(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.jwksFetches++
	set := jose.JSONWebKeySet{}
	for _, k := range s.keys {
		if !k.withdrawn {
			set.Keys = append(set.Keys, publicJWK(k))
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, set)
}

// oauthError answers as RFC 6749 section 5.2 says.
func oauthError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// clientAuth finds the client of a token request (basic or post).
func (s *Server) clientAuth(r *http.Request) (*Client, bool) {
	id, secret, basic := r.BasicAuth()
	if basic {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	s.mu.Lock()
	c := s.clients[id]
	s.mu.Unlock()
	if c == nil || c.Secret != secret {
		return nil, false
	}
	return c, true
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	c, ok := s.clientAuth(r)
	if !ok {
		oauthError(w, http.StatusUnauthorized, "invalid_client", "unknown client or wrong secret")
		return
	}
	sub, claims := c.Subject, map[string]any{}
	for k, v := range c.Claims {
		claims[k] = v
	}
	resource, scope := r.PostForm.Get("resource"), r.PostForm.Get("scope")
	switch r.PostForm.Get("grant_type") {
	case "client_credentials":
		if sub == "" {
			sub = c.ID
		}
	case "authorization_code":
		s.mu.Lock()
		code, ok := s.codes[r.PostForm.Get("code")]
		delete(s.codes, r.PostForm.Get("code")) // one use only
		u := s.user
		s.mu.Unlock()
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		switch {
		case !ok || code.expires.Before(s.Now()) || code.clientID != c.ID:
			oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown, used or expired code")
			return
		case code.redirectURI != r.PostForm.Get("redirect_uri"):
			oauthError(w, http.StatusBadRequest, "invalid_grant", "redirect_uri differs from the authorization request's")
			return
		case base64.RawURLEncoding.EncodeToString(sum[:]) != code.challenge:
			oauthError(w, http.StatusBadRequest, "invalid_grant", "PKCE code_verifier does not match")
			return
		case resource != "" && resource != code.resource:
			oauthError(w, http.StatusBadRequest, "invalid_target", "resource differs from the authorization request's")
			return
		}
		resource, scope = code.resource, code.scope
		sub = u.Subject
		for k, v := range u.Claims {
			claims[k] = v
		}
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", r.PostForm.Get("grant_type"))
		return
	}
	aud := s.DefaultAudience
	if resource != "" {
		aud = resource
	}
	claims["client_id"] = c.ID
	if scope != "" {
		if _, set := claims["scope"]; !set {
			claims["scope"] = scope
		}
	}
	now := s.Now()
	raw, err := s.sign(Token{Subject: sub, Audience: []string{aud}, IssuedAt: now, Expiry: now.Add(s.TokenTTL), Claims: claims})
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	s.mu.Lock()
	s.tokensIssued++
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": raw, "token_type": "Bearer", "expires_in": int(s.TokenTTL.Seconds()),
	})
}

// authorize approves at once: no login, no consent. The redirect_uri must
// be one the client registered, and PKCE S256 is required (OAuth 2.1).
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	c := s.clients[q.Get("client_id")]
	s.mu.Unlock()
	if c == nil || !slices.Contains(c.RedirectURIs, q.Get("redirect_uri")) {
		http.Error(w, "unknown client or unregistered redirect_uri", http.StatusBadRequest)
		return
	}
	redirect, _ := url.Parse(q.Get("redirect_uri"))
	back := redirect.Query()
	if q.Get("state") != "" {
		back.Set("state", q.Get("state"))
	}
	if q.Get("response_type") != "code" || q.Get("code_challenge") == "" || q.Get("code_challenge_method") != "S256" {
		back.Set("error", "invalid_request")
		back.Set("error_description", "response_type=code with a PKCE S256 code_challenge is required")
	} else {
		code := s.randomID()
		s.mu.Lock()
		s.codes[code] = authCode{clientID: c.ID, redirectURI: q.Get("redirect_uri"), challenge: q.Get("code_challenge"),
			resource: q.Get("resource"), scope: q.Get("scope"), expires: s.Now().Add(time.Minute)}
		s.mu.Unlock()
		back.Set("code", code)
	}
	redirect.RawQuery = back.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

// register is dynamic client registration (RFC 7591): any client may
// register; it gets a secret unless it asks for token_endpoint_auth_method
// "none" (a public client).
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	var md map[string]any
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&md); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_client_metadata", err.Error())
		return
	}
	c := Client{ID: "dcr-" + s.randomID()}
	if uris, ok := md["redirect_uris"].([]any); ok {
		for _, u := range uris {
			if s, ok := u.(string); ok {
				c.RedirectURIs = append(c.RedirectURIs, s)
			}
		}
	}
	md["client_id"] = c.ID
	md["client_id_issued_at"] = s.Now().Unix()
	if md["token_endpoint_auth_method"] == "none" {
		delete(md, "client_secret")
	} else {
		c.Secret = s.randomID()
		md["client_secret"] = c.Secret
		md["client_secret_expires_at"] = 0
		if md["token_endpoint_auth_method"] == nil {
			md["token_endpoint_auth_method"] = "client_secret_basic"
		}
	}
	s.AddClient(c)
	writeJSON(w, http.StatusCreated, md)
}
