package authn_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/planlock/planlock/internal/authn"
	"github.com/planlock/planlock/internal/testkit/oauthtest"
)

const resource = "https://planlock.example.com"

// clock is a settable time source, so expiry and refetch intervals are
// tested without sleeping.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newClock() *clock { return &clock{t: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)} }

type fixture struct {
	as   *oauthtest.Server
	clk  *clock
	auth *authn.JWTAuthenticator
}

func newFixture(t testing.TB, mod func(*authn.JWTConfig)) *fixture {
	t.Helper()
	clk := newClock()
	as := oauthtest.New(t)
	as.Now = clk.Now
	cfg := authn.JWTConfig{
		Issuer:   as.Issuer(),
		Audience: resource,
		Plans: map[string][]string{
			"alice": {"refund"}, "ops": {"deploy", "refund"}, "planlock:refund": {"refund"}, "root": {"*"},
		},
		Now: clk.Now,
	}
	if mod != nil {
		mod(&cfg)
	}
	a, err := authn.NewJWT(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{as: as, clk: clk, auth: a}
}

func (f *fixture) token(t testing.TB, mod func(*oauthtest.Token)) string {
	tok := oauthtest.Token{Subject: "alice", Audience: []string{resource}}
	if mod != nil {
		mod(&tok)
	}
	return f.as.Issue(t, tok)
}

// forge builds a compact JWS by hand, as an attacker would.
func forge(header, payload map[string]any, sign func(input string) []byte) string {
	h, _ := json.Marshal(header)
	p, _ := json.Marshal(payload)
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p)
	return input + "." + base64.RawURLEncoding.EncodeToString(sign(input))
}

func TestJWTValidation(t *testing.T) {
	f := newFixture(t, nil)
	now := f.clk.Now()
	kid := f.as.SigningKeyID()
	validClaims := map[string]any{
		"iss": f.as.Issuer(), "sub": "alice", "aud": resource,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
	pub, err := json.Marshal(f.as.PublicJWK(kid))
	if err != nil {
		t.Fatal(err)
	}
	other := oauthtest.New(t) // another authorization server: its first key has the same kid
	other.Now = f.clk.Now

	cases := []struct {
		name      string
		token     string
		wantErr   error
		wantPlans []string
	}{
		{"valid", f.token(t, nil), nil, []string{"refund"}},
		{"audience among several", f.token(t, func(k *oauthtest.Token) { k.Audience = []string{"https://other", resource} }), nil, []string{"refund"}},
		{"expired within leeway", f.token(t, func(k *oauthtest.Token) { k.Expiry = now.Add(-10 * time.Second) }), nil, []string{"refund"}},
		{"expired", f.token(t, func(k *oauthtest.Token) {
			k.IssuedAt, k.Expiry = now.Add(-2*time.Hour), now.Add(-time.Minute)
		}), authn.ErrInvalidToken, nil},
		{"not yet valid", f.token(t, func(k *oauthtest.Token) { k.NotBefore = now.Add(5 * time.Minute) }), authn.ErrInvalidToken, nil},
		{"issued in the future", f.token(t, func(k *oauthtest.Token) {
			k.IssuedAt, k.Expiry = now.Add(10*time.Minute), now.Add(time.Hour)
		}), authn.ErrInvalidToken, nil},
		{"wrong audience", f.token(t, func(k *oauthtest.Token) { k.Audience = []string{"https://other.example.com"} }), authn.ErrInvalidToken, nil},
		{"audience with a trailing slash", f.token(t, func(k *oauthtest.Token) { k.Audience = []string{resource + "/"} }), authn.ErrInvalidToken, nil},
		{"no audience", f.token(t, func(k *oauthtest.Token) { k.Audience = nil }), authn.ErrInvalidToken, nil},
		{"wrong issuer", f.token(t, func(k *oauthtest.Token) { k.Issuer = "https://evil.example.com" }), authn.ErrInvalidToken, nil},
		{"no subject", f.token(t, func(k *oauthtest.Token) { k.Subject = "" }), authn.ErrInvalidToken, nil},
		{"other server's key, same kid", other.Issue(t, oauthtest.Token{Subject: "alice", Audience: []string{resource}, Issuer: f.as.Issuer()}), authn.ErrInvalidToken, nil},
		{"alg none", forge(map[string]any{"typ": "at+jwt", "alg": "none", "kid": kid}, validClaims, func(string) []byte { return nil }), authn.ErrInvalidToken, nil},
		{"HS256 keyed with the public JWK", forge(map[string]any{"typ": "at+jwt", "alg": "HS256", "kid": kid}, validClaims, func(in string) []byte {
			m := hmac.New(sha256.New, pub)
			m.Write([]byte(in))
			return m.Sum(nil)
		}), authn.ErrInvalidToken, nil},
		{"tampered payload", func() string {
			parts := strings.Split(f.token(t, nil), ".")
			c := maps(validClaims)
			c["sub"] = "root"
			p, _ := json.Marshal(c)
			parts[1] = base64.RawURLEncoding.EncodeToString(p)
			return strings.Join(parts, ".")
		}(), authn.ErrInvalidToken, nil},
		{"attacker's key embedded in the header (jwk)", embeddedJWK(t, kid, validClaims), authn.ErrInvalidToken, nil},
		{"no exp", forgeSigned(t, f, map[string]any{"iss": f.as.Issuer(), "sub": "alice", "aud": resource}), authn.ErrInvalidToken, nil},
		{"unmapped subject: no plans", f.token(t, func(k *oauthtest.Token) { k.Subject = "mallory" }), nil, nil},
		{"wildcard", f.token(t, func(k *oauthtest.Token) { k.Subject = "root" }), nil, []string{"*"}},
		{"typ application/at+jwt", f.token(t, func(k *oauthtest.Token) { k.Type = "application/at+jwt" }), nil, []string{"refund"}},
		{"typ AT+JWT (case-insensitive)", f.token(t, func(k *oauthtest.Token) { k.Type = "AT+JWT" }), nil, []string{"refund"}},
		{"OIDC ID token (typ JWT)", f.token(t, func(k *oauthtest.Token) { k.Type = "JWT" }), authn.ErrInvalidToken, nil},
		{"ID token without typ", f.token(t, func(k *oauthtest.Token) { k.Type = oauthtest.NoType }), authn.ErrInvalidToken, nil},
		{"typ application/jwt", f.token(t, func(k *oauthtest.Token) { k.Type = "application/jwt" }), authn.ErrInvalidToken, nil},
		{"typ at+jwt with a suffix", f.token(t, func(k *oauthtest.Token) { k.Type = "at+jwt; x" }), authn.ErrInvalidToken, nil},
		{"logout token typ", f.token(t, func(k *oauthtest.Token) { k.Type = "logout+jwt" }), authn.ErrInvalidToken, nil},
		{"too long", f.token(t, func(k *oauthtest.Token) {
			k.Claims = map[string]any{"pad": strings.Repeat("x", authn.MaxTokenBytes)}
		}), authn.ErrInvalidToken, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id, err := f.auth.Verify(context.Background(), c.token)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("Verify = %+v, %v; want %v", id, err, c.wantErr)
				}
				t.Log(err)
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if id.Subject == "" || !strings.HasPrefix(id.Subject, "jwt:") || !slices.Equal(id.Plans, c.wantPlans) {
				t.Fatalf("identity %+v, want plans %v", id, c.wantPlans)
			}
		})
	}
}

func maps(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// forgeSigned signs arbitrary claims (none of the defaults Issue adds)
// with the server's real signing key.
func forgeSigned(t *testing.T, f *fixture, claims map[string]any) string {
	t.Helper()
	return f.as.IssueRaw(t, claims)
}

// embeddedJWK signs with the attacker's own key and carries its public key
// in the header, under the real key's kid (CVE-2018-0114 style).
func embeddedJWK(t *testing.T, kid string, claims map[string]any) string {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: priv, KeyID: kid}},
		(&jose.SignerOptions{EmbedJWK: true}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TokenTypes widens or narrows the typ values accepted, for an
// authorization server that types its access tokens otherwise.
func TestJWTConfiguredTokenTypes(t *testing.T) {
	tests := []struct {
		name  string
		types []string
		typ   string
		ok    bool
	}{
		{"configured JWT accepts typ JWT", []string{"at+jwt", "JWT"}, "JWT", true},
		{"configured JWT accepts application/jwt", []string{"at+jwt", "JWT"}, "application/jwt", true},
		{"configured JWT still accepts at+jwt", []string{"at+jwt", "JWT"}, "", true},
		{"configured JWT refuses no typ", []string{"at+jwt", "JWT"}, oauthtest.NoType, false},
		{"configured none accepts no typ", []string{"at+jwt", "none"}, oauthtest.NoType, true},
		{"only a vendor type: at+jwt refused", []string{"application/vnd.example+jwt"}, "", false},
		{"only a vendor type: it is accepted", []string{"application/vnd.example+jwt"}, "vnd.example+jwt", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, func(c *authn.JWTConfig) { c.TokenTypes = tt.types })
			_, err := f.auth.Verify(context.Background(), f.token(t, func(k *oauthtest.Token) { k.Type = tt.typ }))
			if tt.ok != (err == nil) {
				t.Fatalf("Verify(typ %q) with TokenTypes %q = %v, want ok %v", tt.typ, tt.types, err, tt.ok)
			}
			if err != nil && !errors.Is(err, authn.ErrInvalidToken) {
				t.Fatalf("Verify = %v, want ErrInvalidToken", err)
			}
		})
	}
	if _, err := authn.NewJWT(authn.JWTConfig{Issuer: "https://as.example.com", Audience: resource, TokenTypes: []string{" "}}); err == nil {
		t.Fatal("NewJWT accepted a blank token type")
	}
}

func TestJWTAlgorithmsAndKeyTypes(t *testing.T) {
	for _, alg := range []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA} {
		t.Run(string(alg), func(t *testing.T) {
			f := newFixture(t, nil)
			f.as.Rotate(t, alg)
			if _, err := f.auth.Verify(context.Background(), f.token(t, nil)); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("algorithm not allowed by config", func(t *testing.T) {
		f := newFixture(t, func(c *authn.JWTConfig) { c.Algorithms = []jose.SignatureAlgorithm{jose.RS256} })
		_, err := f.auth.Verify(context.Background(), f.token(t, nil)) // ES256
		if !errors.Is(err, authn.ErrInvalidToken) {
			t.Fatalf("ES256 token with only RS256 allowed: %v", err)
		}
	})
}

func TestJWTClaimMapping(t *testing.T) {
	cases := []struct {
		claim  string
		claims map[string]any
		want   []string
	}{
		{"groups", map[string]any{"groups": []any{"ops", "nobody"}}, []string{"deploy", "refund"}},
		{"groups", map[string]any{"groups": []any{"nobody"}}, nil},
		{"groups", map[string]any{"groups": "ops"}, []string{"deploy", "refund"}},
		{"groups", map[string]any{"groups": 7}, nil},
		{"groups", nil, nil},
		{"scope", map[string]any{"scope": "openid planlock:refund email"}, []string{"refund"}},
		{"scope", map[string]any{"scope": "openid email"}, nil},
		{"scp", map[string]any{"scp": []any{"planlock:refund"}}, []string{"refund"}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s=%v", c.claim, c.claims), func(t *testing.T) {
			f := newFixture(t, func(cfg *authn.JWTConfig) { cfg.PlansClaim = c.claim })
			id, err := f.auth.Verify(context.Background(), f.token(t, func(k *oauthtest.Token) {
				k.Subject, k.Claims = "someone", c.claims
			}))
			if err != nil {
				t.Fatal(err)
			}
			if id.Subject != "jwt:someone" || !slices.Equal(id.Plans, c.want) {
				t.Fatalf("identity %+v, want plans %v", id, c.want)
			}
		})
	}
}

func TestJWTKeyRotation(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	old := f.as.SigningKeyID()
	if _, err := f.auth.Verify(ctx, f.token(t, nil)); err != nil {
		t.Fatal(err)
	}
	if n := f.as.JWKSFetches(); n != 1 {
		t.Fatalf("JWKS fetched %d times for the first token, want 1", n)
	}

	// The issuer rotates: a token with the new kid makes planlock refetch
	// (once the minimum gap since the last fetch has passed).
	f.as.Rotate(t, jose.RS256)
	f.clk.Add(31 * time.Second)
	if _, err := f.auth.Verify(ctx, f.token(t, nil)); err != nil {
		t.Fatalf("token signed with the rotated-in key: %v", err)
	}
	if n := f.as.JWKSFetches(); n != 2 {
		t.Fatalf("JWKS fetched %d times after a rotation, want 2", n)
	}
	// The old key still verifies while the issuer publishes it.
	oldTok := f.token(t, func(k *oauthtest.Token) { k.KeyID = old })
	if _, err := f.auth.Verify(ctx, oldTok); err != nil {
		t.Fatalf("old key still in the JWKS: %v", err)
	}

	// The issuer withdraws the old key: once the cache is refreshed, tokens
	// signed with it no longer verify.
	f.as.RemoveKey(old)
	f.clk.Add(11 * time.Minute)
	_, err := f.auth.Verify(ctx, oldTok)
	if !errors.Is(err, authn.ErrInvalidToken) {
		t.Fatalf("token of a withdrawn key after refresh: %v", err)
	}
	if _, err := f.auth.Verify(ctx, f.token(t, nil)); err != nil {
		t.Fatalf("current key after refresh: %v", err)
	}
}

func TestJWTUnknownKidRefetchIsRateLimited(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	if _, err := f.auth.Verify(ctx, f.token(t, nil)); err != nil {
		t.Fatal(err)
	}
	// A flood of tokens naming kids the issuer never had, some in parallel.
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok := forge(map[string]any{"typ": "at+jwt", "alg": "ES256", "kid": fmt.Sprintf("bogus-%d", i)}, map[string]any{"sub": "x"},
				func(string) []byte { return make([]byte, 64) })
			if _, err := f.auth.Verify(ctx, tok); !errors.Is(err, authn.ErrInvalidToken) {
				t.Errorf("bogus kid: %v", err)
			}
		}()
		if i == 100 {
			wg.Wait()
			// Within 30s of the first fetch: no refetch at all.
			if n := f.as.JWKSFetches(); n != 1 {
				t.Fatalf("JWKS fetched %d times within the minimum gap, want 1", n)
			}
			f.clk.Add(31 * time.Second) // one more refetch is allowed now
		}
	}
	wg.Wait()
	if n := f.as.JWKSFetches(); n != 2 {
		t.Fatalf("JWKS fetched %d times, want 2 (first token, then one for 100 bogus kids 31s later)", n)
	}
	// Valid tokens keep verifying from the cache meanwhile.
	if _, err := f.auth.Verify(ctx, f.token(t, nil)); err != nil {
		t.Fatal(err)
	}
	if n := f.as.JWKSFetches(); n != 2 {
		t.Fatalf("a known kid caused a fetch (%d)", n)
	}
}

func TestJWTKeysUnavailable(t *testing.T) {
	var down bool
	var mu sync.Mutex
	as := oauthtest.New(t)
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		d := down
		mu.Unlock()
		if d {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		resp, err := http.Get(as.JWKSURL())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", "application/json")
		var buf strings.Builder
		b := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(b)
			buf.Write(b[:n])
			if err != nil {
				break
			}
		}
		fmt.Fprint(w, buf.String())
	}))
	t.Cleanup(jwks.Close)
	clk := newClock()
	as.Now = clk.Now
	a, err := authn.NewJWT(authn.JWTConfig{Issuer: as.Issuer(), Audience: resource, JWKSURL: jwks.URL, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tok := as.Issue(t, oauthtest.Token{Subject: "alice", Audience: []string{resource}})
	if _, err := a.Verify(ctx, tok); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	down = true
	mu.Unlock()
	// The cache is stale and the refresh fails: the keys fetched before
	// keep working for a while...
	clk.Add(20 * time.Minute)
	tok = as.Issue(t, oauthtest.Token{Subject: "alice", Audience: []string{resource}, Expiry: clk.Now().Add(3 * time.Hour)})
	if _, err := a.Verify(ctx, tok); err != nil {
		t.Fatalf("stale keys during an outage: %v", err)
	}
	// ...but not forever.
	clk.Add(time.Hour)
	if _, err := a.Verify(ctx, tok); !errors.Is(err, authn.ErrKeysUnavailable) {
		t.Fatalf("keys older than MaxStale during an outage: %v", err)
	}
}

func TestJWTDiscovery(t *testing.T) {
	ctx := context.Background()
	t.Run("RFC 8414 metadata", func(t *testing.T) {
		f := newFixture(t, nil)
		if _, err := f.auth.Verify(ctx, f.token(t, nil)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("OpenID configuration of an issuer with a path", func(t *testing.T) {
		as := oauthtest.New(t)
		var issuer string
		mux := http.NewServeMux()
		mux.HandleFunc("/realms/acme/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `{"issuer": %q, "jwks_uri": %q}`, issuer, as.JWKSURL())
		})
		idp := httptest.NewServer(mux)
		t.Cleanup(idp.Close)
		issuer = idp.URL + "/realms/acme"
		a, err := authn.NewJWT(authn.JWTConfig{Issuer: issuer, Audience: resource})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Verify(ctx, as.Issue(t, oauthtest.Token{Subject: "a", Audience: []string{resource}, Issuer: issuer})); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("metadata naming another issuer", func(t *testing.T) {
		as := oauthtest.New(t)
		idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `{"issuer": "https://evil.example.com", "jwks_uri": %q}`, as.JWKSURL())
		}))
		t.Cleanup(idp.Close)
		a, err := authn.NewJWT(authn.JWTConfig{Issuer: idp.URL, Audience: resource})
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.Verify(ctx, as.Issue(t, oauthtest.Token{Subject: "a", Audience: []string{resource}, Issuer: idp.URL}))
		if !errors.Is(err, authn.ErrKeysUnavailable) || !strings.Contains(err.Error(), "evil") {
			t.Fatalf("metadata of another issuer: %v", err)
		}
	})
	t.Run("oversized JWKS", func(t *testing.T) {
		big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"keys": ["`+strings.Repeat("x", authn.MaxJWKSBytes)+`"]}`)
		}))
		t.Cleanup(big.Close)
		as := oauthtest.New(t)
		a, _ := authn.NewJWT(authn.JWTConfig{Issuer: as.Issuer(), Audience: resource, JWKSURL: big.URL})
		_, err := a.Verify(ctx, as.Issue(t, oauthtest.Token{Subject: "a", Audience: []string{resource}}))
		if !errors.Is(err, authn.ErrKeysUnavailable) || !strings.Contains(err.Error(), "larger than") {
			t.Fatalf("oversized JWKS: %v", err)
		}
	})
}

func TestJWTAuthenticate(t *testing.T) {
	f := newFixture(t, nil)
	tok := f.token(t, nil)
	cases := []struct {
		name, header string
		wantErr      error
	}{
		{"no header", "", authn.ErrNoCredentials},
		{"basic", "Basic YWxpY2U6cHc=", authn.ErrNoCredentials},
		{"opaque bearer (a static token)", "Bearer pl_3b9f0c2a7d", authn.ErrNoCredentials},
		{"dotted opaque bearer", "Bearer a.b.c", authn.ErrNoCredentials},
		{"jwt", "Bearer " + tok, nil},
		{"jwt, lower-case scheme", "bearer " + tok, nil},
		{"expired jwt", "Bearer " + f.token(t, func(k *oauthtest.Token) {
			k.IssuedAt, k.Expiry = f.clk.Now().Add(-2*time.Hour), f.clk.Now().Add(-time.Hour)
		}), authn.ErrInvalidToken},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/mcp/refund", nil)
			if c.header != "" {
				r.Header.Set("Authorization", c.header)
			}
			id, err := f.auth.Authenticate(r)
			if c.wantErr == nil && (err != nil || id.Subject != "jwt:alice") {
				t.Fatalf("Authenticate = %+v, %v", id, err)
			}
			if c.wantErr != nil && !errors.Is(err, c.wantErr) {
				t.Fatalf("Authenticate = %+v, %v; want %v", id, err, c.wantErr)
			}
		})
	}
}

func TestNewJWTRefusesUnsafeConfig(t *testing.T) {
	cases := []struct {
		name string
		cfg  authn.JWTConfig
		want string
	}{
		{"no issuer", authn.JWTConfig{Audience: resource}, "issuer is required"},
		{"no audience", authn.JWTConfig{Issuer: "https://idp.example.com"}, "audience"},
		{"http issuer", authn.JWTConfig{Issuer: "http://idp.example.com", Audience: resource}, "must be https"},
		{"http JWKS", authn.JWTConfig{Issuer: "https://idp.example.com", Audience: resource, JWKSURL: "http://idp.example.com/k"}, "must be https"},
		{"HS256", authn.JWTConfig{Issuer: "https://idp.example.com", Audience: resource, Algorithms: []jose.SignatureAlgorithm{jose.HS256}}, "not allowed"},
		{"none", authn.JWTConfig{Issuer: "https://idp.example.com", Audience: resource, Algorithms: []jose.SignatureAlgorithm{"none"}}, "not allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := authn.NewJWT(c.cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("NewJWT = %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestLoadPlanMap(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	m, err := authn.LoadPlanMap(write("ok.json", `{"ops": ["deploy", "refund"], "alice": ["refund"]}`))
	if err != nil || !slices.Equal(m["ops"], []string{"deploy", "refund"}) {
		t.Fatalf("LoadPlanMap = %v, %v", m, err)
	}
	for name, body := range map[string]string{
		"list.json":  `[["ops", "deploy"]]`,
		"empty.json": `{"ops": []}`,
		"blank.json": `{"": ["refund"]}`,
		"noname":     `{"ops": [""]}`,
	} {
		if _, err := authn.LoadPlanMap(write(name, body)); err == nil {
			t.Errorf("%s %s: no error", name, body)
		}
	}
}

func TestPlanMapReload(t *testing.T) {
	f := newFixture(t, nil)
	path := filepath.Join(t.TempDir(), "plans.json")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"alice": ["refund"]}`)
	file, m, err := authn.OpenPlanMap(path)
	if err != nil {
		t.Fatal(err)
	}
	f.auth.SetPlans(m)
	plansOfAlice := func() []string {
		id, err := f.auth.Verify(context.Background(), f.token(t, nil))
		if err != nil {
			t.Fatal(err)
		}
		return id.Plans
	}
	if m, err := file.Reload(); m != nil || err != nil {
		t.Fatalf("unchanged file: %v, %v", m, err)
	}
	write(`{"alice": ["deploy"]}`)
	if m, err := file.Reload(); m != nil || err != nil { // acted on once it looks the same twice
		t.Fatalf("edited file, first look: %v, %v", m, err)
	}
	m, err = file.Reload()
	if err != nil || !slices.Equal(m["alice"], []string{"deploy"}) {
		t.Fatalf("edited file: %v, %v", m, err)
	}
	f.auth.SetPlans(m)
	if got := plansOfAlice(); !slices.Equal(got, []string{"deploy"}) {
		t.Fatalf("after the edit alice may use %v", got)
	}
	write(`{"alice": `)
	_, _ = file.Reload()
	if m, err := file.Reload(); m != nil || err == nil || !strings.Contains(err.Error(), "keeping the mapping read before") {
		t.Fatalf("broken file: %v, %v", m, err)
	}
	if m, err := file.Reload(); m != nil || err != nil {
		t.Fatalf("the same broken file again: %v, %v (want silence)", m, err)
	}
	os.Remove(path)
	if _, err := file.Reload(); err == nil {
		t.Fatal("removed file: no error")
	}
	write(`{"alice": ["deploy"]}`)
	if m, err := file.Reload(); m != nil || err != nil {
		t.Fatalf("restored to the content in use: %v, %v", m, err)
	}
}

// BenchmarkJWTVerify is the cost of one request's token check with the keys
// cached: signature, claims and the plan mapping.
func BenchmarkJWTVerify(b *testing.B) {
	for _, alg := range []jose.SignatureAlgorithm{jose.ES256, jose.RS256, jose.EdDSA} {
		b.Run(string(alg), func(b *testing.B) {
			f := newFixture(b, nil)
			f.as.Rotate(b, alg)
			tok := f.token(b, nil)
			ctx := context.Background()
			if _, err := f.auth.Verify(ctx, tok); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := f.auth.Verify(ctx, tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The claim-to-plans mapping, rewritten in place in two halves, is never
// acted on half written, even when the half parses.
func TestPlanMapReloadIgnoresTornWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plans.json")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"alice": ["refund-readonly"]}`)
	file, _, err := authn.OpenPlanMap(path)
	if err != nil {
		t.Fatal(err)
	}
	// A half that is valid JSON: a shorter list of plans, or a name cut short.
	for _, half := range []string{`{"alice": ["refund"]}`, `{"alice": ["refund-readonly"], "ops": ["*"]}`} {
		write(half)
		if m, err := file.Reload(); m != nil || err != nil {
			t.Fatalf("half %s acted on at first look: %v, %v", half, m, err)
		}
		write(`{"alice": ["refund-readonly", "triage"]}`)
		if m, err := file.Reload(); m != nil || err != nil {
			t.Fatalf("whole file acted on at its first look: %v, %v", m, err)
		}
		m, err := file.Reload()
		if err != nil || !slices.Equal(m["alice"], []string{"refund-readonly", "triage"}) {
			t.Fatalf("stable whole file: %v, %v", m, err)
		}
		write(`{"alice": ["refund-readonly"]}`)
		_, _ = file.Reload()
		if m, err := file.Reload(); m == nil || err != nil {
			t.Fatalf("back to the first: %v, %v", m, err)
		}
	}
}
