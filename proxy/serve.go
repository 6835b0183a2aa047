package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// ServeStdio serves one agent over in/out until in closes or ctx ends.
func (p *Proxy) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The client's pipes, opened again to be read and written through the
	// poller with raw calls (rawpipe_linux.go); closing them on return also
	// ends a read still waiting for the client.
	if f := pollableStdio(in, false); f != nil {
		defer f.Close()
		in = rawIO[io.Reader](f)
	}
	if f := pollableStdio(out, true); f != nil {
		defer f.Close()
		out = rawIO[io.Writer](f)
	}
	p.stdioProg = &sessionProgress{}
	sw := &syncWriter{w: out}
	out = progressCounter{w: sw, n: &p.stdioProg.written}
	defer p.start(ctx)()
	if err := p.up.Refused(); err != nil {
		return err // nothing was read: the caller answers the client with it
	}
	err := p.serveLines(ctx, limitLines(ctx, in, sw, p.maxMessageBytes(), p.cfg.Log), out)
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// ServeListener serves streamable HTTP at http://<ln>/mcp until ctx ends. When
// token is not empty every request needs "Authorization: Bearer <token>".
// ServeListenerWith takes the other options.
func (p *Proxy) ServeListener(ctx context.Context, ln net.Listener, token string) error {
	var o HTTPOptions
	if token != "" {
		o.Tokens = []string{token}
	}
	return p.ServeListenerWith(ctx, ln, o)
}

// ServeListenerWith serves streamable HTTP at http://<ln>/mcp until ctx ends,
// behind the front httpfront.go describes: origin, bearer identity, session
// ownership, then the body limit and the MCP server.
func (p *Proxy) ServeListenerWith(ctx context.Context, ln net.Listener, o HTTPOptions) error {
	o.defaults()
	allowed := map[string]bool{}
	for _, a := range append(ownOrigins(ln.Addr()), o.AllowOrigins...) {
		n, err := NormalizeOrigin(a)
		if err != nil {
			return fmt.Errorf("allowed origin: %w", err)
		}
		allowed[n] = true
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer p.start(ctx)() // after the HTTP server's shutdown below
	if err := p.up.Refused(); err != nil {
		return err // the listener is left open: the caller answers on it
	}
	ids := &sessionIDs{}
	h := server.NewStreamableHTTPServer(p.srv, server.WithEndpointPath("/mcp"), server.WithSessionIdManagerResolver(ids))
	mux := http.NewServeMux()
	mux.Handle("/mcp", deadlines(o, checkOrigin(allowed, authBearer(o.Tokens,
		checkSession(ids, limitBody(p.maxMessageBytes(), p.countProgress(p.fastHTTP(h))))))))
	hs := &http.Server{
		Handler: mux, ReadHeaderTimeout: o.ReadHeaderTimeout, IdleTimeout: o.IdleTimeout,
		// The body and write bounds are per request (deadlines): a
		// connection-wide ReadTimeout or WriteTimeout would cut off SSE
		// streams that outlive it.
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	_ = h.Shutdown(sctx)
	_ = hs.Shutdown(sctx)
	return nil
}

// start runs the upstream and waits for its first connection attempt, so
// that the first tools/list already shows the upstream's schemas. A failed
// attempt does not stop the proxy: calls get a clear error until it is up.
// The returned stop ends the upstream (its process group, escalating to
// SIGKILL: stdioTransport.Close) and waits for that, so that no exit path
// of a serve leaves it running.
func (p *Proxy) start(ctx context.Context) (stop func()) {
	rctx, cancel := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); p.Run(rctx) }()
	stop = func() { cancel(); <-ran }
	select {
	case <-p.up.FirstAttempt():
	case <-ctx.Done():
	}
	p.announceExtras(upstreamCaps{}, false) // no-op when the upstream answered
	if ok, why := p.up.Ready(); !ok {
		if ee := (*ExitError)(nil); errors.As(why, &ee) {
			// The cause first: a command that cannot start says why.
			fmt.Fprintf(p.cfg.Log, "planlock proxy: %v; retrying with backoff, calls fail until it starts\n", ee)
		} else {
			fmt.Fprintf(p.cfg.Log, "planlock proxy: upstream not available yet, retrying with backoff: %v\n", why)
		}
	}
	return stop
}

func (p *Proxy) maxMessageBytes() int {
	if p.cfg.MaxMessageBytes > 0 {
		return p.cfg.MaxMessageBytes
	}
	return DefaultMaxMessageBytes
}

// countProgress counts the progress notifications written to the responses
// of each session (POST answers and the GET stream alike), so that a call
// can wait until its own have reached the client before its answer is
// written (see waitProgressWritten).
func (p *Proxy) countProgress(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sp := p.sessionProgress(r.Header.Get(server.HeaderKeySessionID)); sp != nil {
			w = &countingResponseWriter{ResponseWriter: w, progressCounter: progressCounter{w: w, n: &sp.written}}
		}
		next.ServeHTTP(w, r)
	})
}

// countingResponseWriter counts progress notifications in what is written
// and keeps the response streamable (mcp-go streams only to an http.Flusher).
type countingResponseWriter struct {
	http.ResponseWriter
	progressCounter
}

func (c *countingResponseWriter) Write(b []byte) (int, error) { return c.progressCounter.Write(b) }

func (c *countingResponseWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (c *countingResponseWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// limitBody refuses a request body larger than max before the MCP server
// reads it whole.
func limitBody(max int, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > int64(max) {
			http.Error(w, fmt.Sprintf("planlock: request body of %d bytes is larger than the limit of %d bytes (--max-message-bytes)", r.ContentLength, max), http.StatusRequestEntityTooLarge)
			return
		}
		if r.ContentLength < 0 {
			// A body of unknown length (chunked) is cut at max. One of a
			// declared length ends there already: net/http reads no more.
			r.Body = http.MaxBytesReader(w, r.Body, int64(max))
		}
		next.ServeHTTP(w, r)
	})
}
