package proxy

// Mounting a proxy into a server that serves many (planlock serve): the
// per-plan part of the HTTP front (sessions bound to the caller, body limit,
// progress counting), while the server runs the shared part (deadlines,
// origin, authentication) once for every plan.

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/server"

	"github.com/planlock/planlock/internal/authn"
)

// Front is the shared part of the HTTP front for a server that serves
// several proxies: per-request body and write deadlines, then the Origin
// check (the listen address's own origins and o.AllowOrigins). Its
// ReadHeaderTimeout and IdleTimeout are for the caller's http.Server
// (Defaults fills them).
func Front(o HTTPOptions, addr net.Addr, next http.Handler) (http.Handler, error) {
	o.defaults()
	allowed := map[string]bool{}
	for _, a := range append(ownOrigins(addr), o.AllowOrigins...) {
		n, err := NormalizeOrigin(a)
		if err != nil {
			return nil, err
		}
		allowed[n] = true
	}
	return deadlines(o, checkOrigin(allowed, next)), nil
}

// Defaults returns o with its zero timeouts set to the defaults.
func (o HTTPOptions) Defaults() HTTPOptions {
	o.defaults()
	return o
}

// Mounted is one proxy's streamable HTTP endpoint inside a larger server.
// Its upstream starts with the first request (or Start), not before.
type Mounted struct {
	p       *Proxy
	h       *server.StreamableHTTPServer
	handler http.Handler
	run     context.Context
	once    sync.Once
	started atomic.Bool
	stop    func() // set by Start: ends the upstream and waits for it
}

// Mount prepares the proxy's endpoint at path. run bounds the upstream's
// life: it is started under run on first use and stopped when run ends.
// Every request must carry its caller in its context (WithCaller: the
// server authenticates before); a request without one is refused with 401, and a
// session is bound to the identity's Subject that created it.
func (p *Proxy) Mount(run context.Context, path string) *Mounted {
	ids := &sessionIDs{}
	h := server.NewStreamableHTTPServer(p.srv, server.WithEndpointPath(path), server.WithSessionIdManagerResolver(ids))
	m := &Mounted{p: p, h: h, run: run}
	inner := checkSession(ids, limitBody(p.maxMessageBytes(), p.countProgress(p.fastHTTP(h))))
	m.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := authn.FromContext(r.Context())
		if !ok || id.Subject == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="planlock"`)
			http.Error(w, "planlock: not authenticated", http.StatusUnauthorized)
			return
		}
		m.Start()
		inner.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, id.Subject)))
	})
	return m
}

// ServeHTTP serves one request of an authenticated caller.
func (m *Mounted) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.handler.ServeHTTP(w, r) }

// Start starts the upstream, once, and waits for its first connection
// attempt (see Proxy.start).
func (m *Mounted) Start() {
	m.once.Do(func() {
		m.started.Store(true)
		m.stop = m.p.start(m.run)
	})
}

// Stop ends the upstream, if it was started, and returns once it has exited
// with its process group: an upstream must not outlive the endpoint. Calls
// still in flight are answered as the upstream's end makes them; Shutdown
// and draining come first.
func (m *Mounted) Stop() {
	m.once.Do(func() {}) // a Start after Stop starts nothing
	if m.stop != nil {
		m.stop()
	}
}

// Started reports whether the upstream was started.
func (m *Mounted) Started() bool { return m.started.Load() }

// UpstreamReady reports whether the upstream is connected, and if not, why.
func (m *Mounted) UpstreamReady() (bool, error) { return m.p.up.Ready() }

// Shutdown ends the endpoint's sessions; calls in flight are the caller's
// http.Server's to drain.
func (m *Mounted) Shutdown(ctx context.Context) error { return m.h.Shutdown(ctx) }
