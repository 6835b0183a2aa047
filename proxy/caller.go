package proxy

import (
	"context"

	"github.com/planlock/planlock/internal/authn"
)

// WithCaller returns ctx carrying the caller's identity, for a server that
// mounts proxies (Mount): it authenticates each request and passes the
// caller on this way. subject names the caller in audit records and hold
// pull requests, prefixed by how it was proven ("token:ci-bot",
// "jwt:alice@example.com"); sessions are bound to it.
func WithCaller(ctx context.Context, subject string) context.Context {
	return authn.WithIdentity(ctx, authn.Identity{Subject: subject})
}

// callerOf is the authenticated identity a call came with (authn, set by a
// gateway front), for its audit record and hold; "" without one.
func callerOf(ctx context.Context) string {
	if id, ok := authn.FromContext(ctx); ok {
		return id.Subject
	}
	return ""
}
