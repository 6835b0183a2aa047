// Package authn says who is calling planlock serve: an Authenticator finds
// the Identity of one HTTP request, and the Identity says which plans it may
// use. Static bearer tokens and OAuth 2.1 JWT access tokens both implement
// Authenticator; the gateway asks them in turn.
package authn

import (
	"context"
	"errors"
	"net/http"
	"slices"
)

// Identity is one authenticated caller.
type Identity struct {
	// Subject names the caller in audit records and hold pull requests,
	// prefixed by how it was proven: "token:ci-bot", "jwt:alice@example.com".
	Subject string
	// Plans are the plan names this identity may use; "*" means every plan.
	Plans []string
}

// MayUse reports whether the identity is bound to the plan.
func (id Identity) MayUse(plan string) bool {
	return slices.Contains(id.Plans, plan) || slices.Contains(id.Plans, "*")
}

// ErrNoCredentials means the request carries nothing this Authenticator
// recognises: the gateway asks the next one, and answers 401 if none knows it.
var ErrNoCredentials = errors.New("no credentials")

// Authenticator finds the identity of a request. It returns ErrNoCredentials
// when the request carries none of its kind, and another error (answered
// 401, never retried with another Authenticator) when credentials of its
// kind are present but invalid: expired, wrong audience, unknown token.
type Authenticator interface {
	Authenticate(r *http.Request) (Identity, error)
}

type identityKey struct{}

// WithIdentity returns ctx carrying id.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext is the identity WithIdentity stored, if any.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}
