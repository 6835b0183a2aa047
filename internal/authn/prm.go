package authn

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// ResourceMetadataWellKnown is the well-known path of OAuth 2.0 Protected
// Resource Metadata (RFC 9728).
const ResourceMetadataWellKnown = "/.well-known/oauth-protected-resource"

// ResourceMetadata is planlock's Protected Resource Metadata (RFC 9728): it
// tells an MCP client which authorization server issues tokens for planlock,
// so a client that met a 401 can get a token on its own.
type ResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	ResourceName           string   `json:"resource_name,omitempty"`
}

// NewResourceMetadata describes the resource (planlock's public URL, the
// audience its tokens carry) protected by one authorization server. Tokens
// are accepted in the Authorization header only.
func NewResourceMetadata(resource, issuer string, scopes []string) (ResourceMetadata, error) {
	if err := checkServerURL("resource", resource); err != nil {
		return ResourceMetadata{}, err
	}
	if u, _ := url.Parse(resource); u.RawQuery != "" {
		return ResourceMetadata{}, fmt.Errorf("resource %q must not have a query", resource)
	}
	if issuer == "" {
		return ResourceMetadata{}, errors.New("an authorization server (issuer) is required")
	}
	return ResourceMetadata{
		Resource:               resource,
		AuthorizationServers:   []string{issuer},
		BearerMethodsSupported: []string{"header"},
		ScopesSupported:        scopes,
		ResourceName:           "planlock",
	}, nil
}

// URL is where the metadata is published: the well-known path inserted
// between the resource's host and its path (RFC 9728 section 3.1).
func (m ResourceMetadata) URL() string {
	u, err := url.Parse(m.Resource)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host + m.Path()
}

// Path is the request path the metadata is served at, for the gateway's mux.
func (m ResourceMetadata) Path() string {
	u, err := url.Parse(m.Resource)
	if err != nil {
		return ResourceMetadataWellKnown
	}
	return ResourceMetadataWellKnown + strings.TrimSuffix(u.EscapedPath(), "/")
}

// JSON is the metadata document as served.
func (m ResourceMetadata) JSON() []byte {
	b, _ := json.MarshalIndent(m, "", "  ")
	return append(b, '\n')
}

// Handler serves the metadata document to GET and HEAD. It is public by
// design (a client reads it before it has a token) and the same for every
// caller, so browsers may read it cross-origin.
func (m ResourceMetadata) Handler() http.Handler {
	body := m.JSON()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions {
			w.Header().Set("Access-Control-Allow-Origin", "*")
			w.Header().Set("Access-Control-Allow-Methods", "GET, HEAD")
			w.Header().Set("Access-Control-Allow-Headers", "MCP-Protocol-Version")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=3600")
		w.Header().Set("Access-Control-Allow-Origin", "*")
		if r.Method == http.MethodGet {
			_, _ = w.Write(body)
		}
	})
}

// Challenge is the value of the WWW-Authenticate header the gateway sends
// with a 401 (RFC 6750 section 3, RFC 9728 section 5.1): it points the
// client at the metadata, and says error="invalid_token" when credentials
// were presented and refused (err is neither nil nor ErrNoCredentials).
func (m ResourceMetadata) Challenge(err error) string {
	c := `Bearer resource_metadata="` + m.URL() + `"`
	if err != nil && !errors.Is(err, ErrNoCredentials) {
		c += `, error="invalid_token"`
	}
	return c
}

// ForbiddenChallenge is the WWW-Authenticate value for a 403: a valid token
// whose identity is not bound to the plan asked for (RFC 6750
// insufficient_scope).
func (m ResourceMetadata) ForbiddenChallenge() string {
	return `Bearer resource_metadata="` + m.URL() + `", error="insufficient_scope"`
}
