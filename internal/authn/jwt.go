package authn

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/planlock/planlock/internal/boundedio"
	"github.com/planlock/planlock/internal/stablefile"
)

// ErrInvalidToken is what every refusal of a presented JWT wraps: expired,
// wrong audience or issuer, bad signature, unknown key. The gateway answers
// it with 401 and WWW-Authenticate error="invalid_token".
var ErrInvalidToken = errors.New("invalid token")

// MaxTokenBytes bounds an access token. Real ones are a few kilobytes.
const MaxTokenBytes = 16 << 10

// DefaultAlgorithms are the signature algorithms a JWT may use unless
// configured otherwise: asymmetric only. "none" and the HS* family are never
// accepted (an HMAC "signed" with the public key would verify).
var DefaultAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

// DefaultTokenTypes is the typ an access token must carry unless configured
// otherwise (RFC 9068 section 2.1).
var DefaultTokenTypes = []string{"at+jwt"}

// noTypeHeader in JWTConfig.TokenTypes admits a token without typ.
const noTypeHeader = "none"

// normalTokenType is typ as compared: lower case, without the
// "application/" prefix RFC 7515 section 4.1.9 lets a sender omit.
func normalTokenType(typ string) string {
	t := strings.ToLower(typ)
	if rest, ok := strings.CutPrefix(t, "application/"); ok && !strings.Contains(rest, "/") {
		return rest
	}
	return t
}

// JWTConfig configures a JWTAuthenticator: planlock as an OAuth 2.1
// resource server, accepting access tokens one authorization server issued
// for it.
type JWTConfig struct {
	// Issuer is the authorization server; a token's iss must equal it.
	Issuer string
	// Audience is planlock's resource identifier (its public URL); a
	// token's aud must contain it, so a token issued for another resource
	// is refused.
	Audience string
	// JWKSURL is where the issuer's keys are; empty: discovered from the
	// issuer's metadata (RFC 8414, then OpenID Connect Discovery).
	JWKSURL string
	// PlansClaim names the claim mapped to plans: "sub", a claim holding a
	// string or a list of strings ("groups"), or "scope" (space-separated).
	// Empty means "sub".
	PlansClaim string
	// Plans maps a value of PlansClaim to the plans it may use ("*": all).
	Plans map[string][]string
	// TokenTypes are the JOSE typ header values an access token may carry,
	// compared case-insensitively with any "application/" prefix removed
	// (RFC 7515); "none" admits a token without typ. Empty means
	// DefaultTokenTypes: "at+jwt" only (RFC 9068), so an OpenID Connect ID
	// token (typ "JWT" or none) for the same audience is not an access token.
	TokenTypes []string
	// Algorithms allowed; empty means DefaultAlgorithms. Symmetric
	// algorithms and "none" are refused even if listed.
	Algorithms []jose.SignatureAlgorithm
	// Leeway for exp, nbf and iat (clock skew); zero means 30 seconds.
	Leeway time.Duration
	// HTTPClient fetches metadata and keys; nil means NewHTTPClient().
	HTTPClient *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// KeysTTL: cached keys older than this are refetched (10 minutes).
	// MinRefetch: no two fetches closer than this (30 seconds).
	// MaxStale: keys this old are not used when refetching fails (1 hour).
	KeysTTL, MinRefetch, MaxStale time.Duration
}

// JWTAuthenticator authenticates requests by an OAuth 2.1 access token in
// JWT form (RFC 9068 profile: iss, aud, exp, sub) in the Authorization
// header. It is safe for concurrent use.
type JWTAuthenticator struct {
	issuer, audience string
	plansClaim       string
	plansMu          sync.RWMutex
	plans            map[string][]string
	algs             []jose.SignatureAlgorithm
	types            []string // normalTokenType of each accepted typ
	leeway           time.Duration
	now              func() time.Time
	keys             *keySource
}

// NewJWT checks cfg and returns the authenticator. Nothing is fetched until
// the first token arrives.
func NewJWT(cfg JWTConfig) (*JWTAuthenticator, error) {
	if cfg.Issuer == "" {
		return nil, errors.New("oauth: an issuer is required")
	}
	if err := checkServerURL("issuer", cfg.Issuer); err != nil {
		return nil, fmt.Errorf("oauth: %w", err)
	}
	if cfg.Audience == "" {
		return nil, errors.New("oauth: an audience (planlock's resource URL) is required")
	}
	if cfg.JWKSURL != "" {
		if err := checkServerURL("JWKS URL", cfg.JWKSURL); err != nil {
			return nil, fmt.Errorf("oauth: %w", err)
		}
	}
	algs := cfg.Algorithms
	if len(algs) == 0 {
		algs = DefaultAlgorithms
	}
	for _, a := range algs {
		if !slices.Contains(DefaultAlgorithms, a) {
			return nil, fmt.Errorf("oauth: signature algorithm %q is not allowed (asymmetric algorithms only)", a)
		}
	}
	types := cfg.TokenTypes
	if len(types) == 0 {
		types = DefaultTokenTypes
	}
	var norm []string
	for _, t := range types {
		if strings.TrimSpace(t) != t || t == "" || strings.ContainsAny(t, " \t,;") {
			return nil, fmt.Errorf("oauth: token type %q is not a media type (want at+jwt, application/at+jwt or %s)", t, noTypeHeader)
		}
		norm = append(norm, normalTokenType(t))
	}
	a := &JWTAuthenticator{
		types:      norm,
		issuer:     cfg.Issuer,
		audience:   cfg.Audience,
		plansClaim: cfg.PlansClaim,
		plans:      cfg.Plans,
		algs:       algs,
		leeway:     cfg.Leeway,
		now:        cfg.Now,
	}
	if a.plansClaim == "" {
		a.plansClaim = "sub"
	}
	if a.leeway == 0 {
		a.leeway = 30 * time.Second
	}
	if a.now == nil {
		a.now = time.Now
	}
	client := cfg.HTTPClient
	if client == nil {
		client = NewHTTPClient()
	}
	a.keys = &keySource{
		issuer: cfg.Issuer, jwksURL: cfg.JWKSURL, client: client, now: a.now,
		ttl: orDefault(cfg.KeysTTL, 10*time.Minute), minGap: orDefault(cfg.MinRefetch, 30*time.Second),
		maxStale: orDefault(cfg.MaxStale, time.Hour),
	}
	return a, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Authenticate implements Authenticator. A request without a bearer token,
// or whose bearer token is not a JWT (a static token), is ErrNoCredentials.
func (a *JWTAuthenticator) Authenticate(r *http.Request) (Identity, error) {
	raw, ok := BearerToken(r)
	if !ok || !LooksLikeJWT(raw) {
		return Identity{}, ErrNoCredentials
	}
	return a.Verify(r.Context(), raw)
}

// LooksLikeJWT reports whether tok has the form of a JWS compact
// serialization whose header names an algorithm: an opaque token is never
// taken for one, so it can go to the authenticator that knows it.
func LooksLikeJWT(tok string) bool {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 || len(parts[0]) > MaxTokenBytes {
		return false
	}
	h, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return false
	}
	var hdr struct {
		Alg *string `json:"alg"`
	}
	return json.Unmarshal(h, &hdr) == nil && hdr.Alg != nil
}

// Verify checks a JWT access token and returns the identity it proves.
// A valid token whose claim maps to no plan is an identity with no plans:
// authenticated, but bound to nothing (the gateway answers 403).
func (a *JWTAuthenticator) Verify(ctx context.Context, raw string) (Identity, error) {
	if len(raw) > MaxTokenBytes {
		return Identity{}, fmt.Errorf("%w: longer than %d bytes", ErrInvalidToken, MaxTokenBytes)
	}
	tok, err := jwt.ParseSigned(raw, a.algs)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	if len(tok.Headers) != 1 {
		return Identity{}, fmt.Errorf("%w: %d signatures, want 1", ErrInvalidToken, len(tok.Headers))
	}
	hdr := tok.Headers[0]
	if err := a.checkType(hdr); err != nil {
		return Identity{}, err
	}
	keys, err := a.keys.keys(ctx, hdr.KeyID)
	if err != nil {
		return Identity{}, err
	}
	var std jwt.Claims
	var all map[string]any
	verified := false
	for _, k := range keys {
		if k.Algorithm != "" && k.Algorithm != hdr.Algorithm {
			continue // the key is pinned to another algorithm
		}
		if err := tok.Claims(k.Key, &std, &all); err == nil {
			verified = true
			break
		}
	}
	if !verified {
		return Identity{}, fmt.Errorf("%w: signature (%s, kid %q) does not verify with the keys of %s", ErrInvalidToken, hdr.Algorithm, hdr.KeyID, a.issuer)
	}
	if std.Expiry == nil {
		return Identity{}, fmt.Errorf("%w: no exp claim", ErrInvalidToken)
	}
	err = std.ValidateWithLeeway(jwt.Expected{
		Issuer:      a.issuer,
		AnyAudience: jwt.Audience{a.audience},
		Time:        a.now(),
	}, a.leeway)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %v (iss %q, aud %q)", ErrInvalidToken, err, std.Issuer, []string(std.Audience))
	}
	if std.Issuer == "" {
		return Identity{}, fmt.Errorf("%w: no iss claim", ErrInvalidToken)
	}
	if std.Subject == "" {
		return Identity{}, fmt.Errorf("%w: no sub claim", ErrInvalidToken)
	}
	return Identity{Subject: "jwt:" + std.Subject, Plans: a.plansFor(all)}, nil
}

// checkType refuses a token whose typ header is not an accepted one: an
// ID token or any other JWT the issuer signed for the same audience is not
// an access token (RFC 9068 section 4).
func (a *JWTAuthenticator) checkType(hdr jose.Header) error {
	raw, present := hdr.ExtraHeaders[jose.HeaderType]
	typ := noTypeHeader
	if present {
		s, ok := raw.(string)
		if !ok {
			return fmt.Errorf("%w: typ header is not a string", ErrInvalidToken)
		}
		typ = normalTokenType(s)
		if typ == noTypeHeader {
			return fmt.Errorf("%w: typ %q is not an access token type", ErrInvalidToken, s)
		}
	}
	if !slices.Contains(a.types, typ) {
		shown := "no typ header"
		if present {
			shown = fmt.Sprintf("typ %q", raw)
		}
		return fmt.Errorf("%w: %s, want %s (an access token, RFC 9068)", ErrInvalidToken, shown, strings.Join(a.types, " or "))
	}
	return nil
}

// SetPlans replaces the claim-to-plans mapping (the operator edited it);
// tokens verified from now on are bound by the new one.
func (a *JWTAuthenticator) SetPlans(m map[string][]string) {
	a.plansMu.Lock()
	defer a.plansMu.Unlock()
	a.plans = m
}

// plansFor maps the configured claim's values to plans.
func (a *JWTAuthenticator) plansFor(claims map[string]any) []string {
	a.plansMu.RLock()
	defer a.plansMu.RUnlock()
	var plans []string
	for _, v := range ClaimValues(claims, a.plansClaim) {
		for _, p := range a.plans[v] {
			if !slices.Contains(plans, p) {
				plans = append(plans, p)
			}
		}
	}
	slices.Sort(plans)
	return plans
}

// ClaimValues are the values of one claim: a string (split on spaces for
// "scope", RFC 8693 section 4.2) or the strings of a list ("groups", Okta's
// "scp"). Any other type has no values.
func ClaimValues(claims map[string]any, name string) []string {
	switch v := claims[name].(type) {
	case string:
		if name == "scope" {
			return strings.Fields(v)
		}
		if v == "" {
			return nil
		}
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// LoadPlanMap reads a claim-to-plans mapping: a JSON object whose keys are
// claim values and whose values are lists of plan names, e.g.
//
//	{"payments-team": ["refund"], "platform": ["deploy", "refund"]}
func LoadPlanMap(path string) (map[string][]string, error) {
	_, m, err := OpenPlanMap(path)
	return m, err
}

func parsePlanMap(path string, b []byte) (map[string][]string, error) {
	var m map[string][]string
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("oauth plans %s: want a JSON object of claim value → [plan names]: %w", path, err)
	}
	for k, plans := range m {
		if k == "" || len(plans) == 0 || slices.Contains(plans, "") {
			return nil, fmt.Errorf("oauth plans %s: %q: a non-empty claim value needs a non-empty list of plan names", path, k)
		}
	}
	return m, nil
}

// PlanMapFile is a mapping file the operator may edit while planlock runs.
type PlanMapFile struct {
	path    string
	file    *stablefile.File // only a stable file is acted on
	last    []byte           // the content in use
	lastBad string           // content and error of the last file that did not load
}

// OpenPlanMap reads the mapping file and returns it with the mapping.
func OpenPlanMap(path string) (*PlanMapFile, map[string][]string, error) {
	b, err := boundedio.ReadFile(path, boundedio.MaxConfigBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("oauth plans: %w", err)
	}
	m, err := parsePlanMap(path, b)
	if err != nil {
		return nil, nil, err
	}
	return &PlanMapFile{path: path, file: stablefile.New(path, boundedio.MaxConfigBytes), last: b}, m, nil
}

// Reload reads the file again: the new mapping when its content changed
// and loads, nil when it is unchanged. An error is returned once per
// distinct bad content (nil, nil after that), and the mapping in use stays.
// New content is acted on only once it is stable (the same, whole, on two
// reloads in a row): a file rewritten in place is never used half written.
func (f *PlanMapFile) Reload() (map[string][]string, error) {
	b, stable, err := f.file.Look()
	if err == nil && !stable {
		return nil, nil // changing: look again next time
	}
	if err == nil && string(b) == string(f.last) {
		return nil, nil
	}
	var m map[string][]string
	if err == nil {
		m, err = parsePlanMap(f.path, b)
	} else {
		err = fmt.Errorf("oauth plans: %w", err)
	}
	if err != nil {
		bad := string(b) + "\x00" + err.Error()
		if bad == f.lastBad {
			return nil, nil
		}
		f.lastBad = bad
		return nil, fmt.Errorf("%w; keeping the mapping read before", err)
	}
	f.last, f.lastBad = b, ""
	return m, nil
}

// Run reloads the file every interval until ctx ends, giving a changed
// mapping to a; log receives one line per reload or refusal.
func (f *PlanMapFile) Run(ctx context.Context, interval time.Duration, a *JWTAuthenticator, log func(string)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m, err := f.Reload()
		switch {
		case err != nil:
			log(err.Error())
		case m != nil:
			a.SetPlans(m)
			log(fmt.Sprintf("oauth plans %s reloaded: %d claim values", f.path, len(m)))
		}
	}
}
