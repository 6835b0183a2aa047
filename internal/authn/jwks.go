package authn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/planlock/planlock/internal/boundedio"
)

// Limits of what planlock reads from an authorization server. A JWKS holds
// a few keys of a kilobyte or so; metadata documents are smaller still.
const (
	MaxJWKSBytes     = 1 << 20
	MaxMetadataBytes = 1 << 20
)

// ErrKeysUnavailable means the issuer's signing keys could not be fetched
// (discovery or JWKS failed and no usable keys are cached): the request is
// refused, but the fault is the authorization server's, not the caller's.
var ErrKeysUnavailable = errors.New("issuer signing keys unavailable")

// NewHTTPClient is the client planlock talks to an authorization server
// with: bounded in time, and never following a redirect to another host
// (metadata and keys are fetched from the URLs configured or discovered).
func NewHTTPClient() *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			TLSHandshakeTimeout:   5 * time.Second,
			ResponseHeaderTimeout: 5 * time.Second,
			MaxIdleConns:          4,
			IdleConnTimeout:       90 * time.Second,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 3 || req.URL.Host != via[0].URL.Host || req.URL.Scheme != via[0].URL.Scheme {
				return fmt.Errorf("redirect to %s refused", req.URL.Redacted())
			}
			return nil
		},
	}
}

// keySource fetches an issuer's JWKS and keeps it. Keys are refetched when
// the cached set is older than ttl, or when a token names a kid the set
// does not have (the issuer rotated keys); either way no two fetches are
// closer than minGap, so a flood of tokens with made-up kids costs the
// authorization server one request per minGap. A failed refresh keeps the
// previous keys (an outage of the authorization server must not lock every
// caller out at once) until they are maxStale old.
type keySource struct {
	issuer   string
	client   *http.Client
	now      func() time.Time
	ttl      time.Duration
	minGap   time.Duration
	maxStale time.Duration

	fetchMu sync.Mutex // one fetch at a time

	mu      sync.Mutex
	jwksURL string // configured, or found by discovery
	set     []jose.JSONWebKey
	fetched time.Time // when set was fetched; zero: never
	tried   time.Time // when the last fetch started; zero: never
	lastErr error
}

// keys returns the verification keys a token's kid may name: the keys with
// that kid, or every key when the token names none.
func (s *keySource) keys(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	for attempt := 0; ; attempt++ {
		s.mu.Lock()
		now := s.now()
		found := matchKeys(s.set, kid)
		fresh := !s.fetched.IsZero() && now.Sub(s.fetched) < s.ttl
		usable := !s.fetched.IsZero() && now.Sub(s.fetched) < s.maxStale
		mayFetch := s.tried.IsZero() || now.Sub(s.tried) >= s.minGap
		seen, lastErr := s.tried, s.lastErr
		s.mu.Unlock()

		if fresh && len(found) > 0 {
			return found, nil
		}
		if attempt == 0 && !mayFetch {
			// A fetch may be under way: wait for it, then decide.
			//lint:ignore SA2001 the empty critical section is the wait
			s.fetchMu.Lock()
			s.fetchMu.Unlock()
			continue
		}
		if attempt > 0 {
			switch {
			case usable && len(found) > 0:
				return found, nil
			case !usable && lastErr != nil:
				return nil, fmt.Errorf("%w: %v", ErrKeysUnavailable, lastErr)
			case !usable:
				return nil, fmt.Errorf("%w: keys of %s are older than %s", ErrKeysUnavailable, s.issuer, s.maxStale)
			}
			return nil, fmt.Errorf("%w: no key with kid %q in the JWKS of %s", ErrInvalidToken, kid, s.issuer)
		}
		s.refresh(ctx, seen)
	}
}

func matchKeys(set []jose.JSONWebKey, kid string) []jose.JSONWebKey {
	var out []jose.JSONWebKey
	for _, k := range set {
		if kid == "" || k.KeyID == kid {
			out = append(out, k)
		}
	}
	return out
}

// refresh fetches the JWKS unless another fetch started since seen.
func (s *keySource) refresh(ctx context.Context, seen time.Time) {
	s.fetchMu.Lock()
	defer s.fetchMu.Unlock()
	s.mu.Lock()
	if !s.tried.Equal(seen) {
		s.mu.Unlock()
		return
	}
	s.tried = s.now()
	u := s.jwksURL
	s.mu.Unlock()

	// The fetch serves every request waiting for these keys, not only the
	// one that started it: a client hanging up must not cancel it (the
	// HTTP client's timeout bounds it).
	ctx = context.WithoutCancel(ctx)
	var set []jose.JSONWebKey
	var err error
	if u == "" {
		u, err = discoverJWKS(ctx, s.client, s.issuer)
	}
	if err == nil {
		set, err = fetchJWKS(ctx, s.client, u)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.lastErr = err
		return
	}
	s.jwksURL, s.set, s.fetched, s.lastErr = u, set, s.now(), nil
}

// getJSON fetches u into v, refusing a non-200 answer or more than max bytes.
func getJSON(ctx context.Context, client *http.Client, u string, max int64, v any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	b, err := boundedio.ReadAll(resp.Body, u, max)
	if err != nil {
		return resp.StatusCode, fmt.Errorf("GET %s: %w", u, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return resp.StatusCode, fmt.Errorf("GET %s: %w", u, err)
	}
	return resp.StatusCode, nil
}

// fetchJWKS reads a JWK Set, keeping the public signing keys it holds. A
// key of a type this build cannot parse is skipped, not fatal: issuers
// publish encryption keys and new key types beside their signing keys.
func fetchJWKS(ctx context.Context, client *http.Client, u string) ([]jose.JSONWebKey, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if _, err := getJSON(ctx, client, u, MaxJWKSBytes, &doc); err != nil {
		return nil, fmt.Errorf("JWKS: %w", err)
	}
	var set []jose.JSONWebKey
	for _, raw := range doc.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil {
			continue
		}
		// Only public asymmetric keys verify tokens: a symmetric key in a
		// JWKS would let anyone who read the JWKS sign.
		if !k.IsPublic() || !k.Valid() || (k.Use != "" && k.Use != "sig") {
			continue
		}
		set = append(set, k)
	}
	return set, nil
}

// DiscoveryURLs are where an issuer's metadata is looked for, in order:
// RFC 8414 (/.well-known/oauth-authorization-server inserted before the
// issuer's path) and OpenID Connect Discovery (/.well-known/openid-configuration
// appended to the issuer).
func DiscoveryURLs(issuer string) ([]string, error) {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil, fmt.Errorf("issuer %q: %w", issuer, err)
	}
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	origin := u.Scheme + "://" + u.Host
	return []string{
		origin + "/.well-known/oauth-authorization-server" + path,
		origin + path + "/.well-known/openid-configuration",
	}, nil
}

// discoverJWKS finds the issuer's jwks_uri in its metadata. The metadata
// must name the same issuer (RFC 8414 section 3.3), or it is not used.
func discoverJWKS(ctx context.Context, client *http.Client, issuer string) (string, error) {
	urls, err := DiscoveryURLs(issuer)
	if err != nil {
		return "", err
	}
	var errs []error
	for _, u := range urls {
		var md struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if _, err := getJSON(ctx, client, u, MaxMetadataBytes, &md); err != nil {
			errs = append(errs, err)
			continue
		}
		if md.Issuer != issuer {
			errs = append(errs, fmt.Errorf("%s names issuer %q, not %q", u, md.Issuer, issuer))
			continue
		}
		if err := checkServerURL("jwks_uri", md.JWKSURI); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u, err))
			continue
		}
		return md.JWKSURI, nil
	}
	return "", fmt.Errorf("discovering the JWKS of %s: %w", issuer, errors.Join(errs...))
}

// checkServerURL accepts an absolute https URL, or http to a loopback host
// (an authorization server on the same machine, or a test's).
func checkServerURL(what, s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%s %q: %w", what, s, err)
	}
	if u.Host == "" || u.User != nil || u.Fragment != "" {
		return fmt.Errorf("%s %q is not an absolute URL without credentials or fragment", what, s)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if h := u.Hostname(); h == "localhost" || net.ParseIP(h).IsLoopback() {
			return nil
		}
	}
	return fmt.Errorf("%s %q must be https (http only to a loopback address)", what, s)
}
