// Package mcpserve runs an mcp-go server over stdio or streamable HTTP, the
// way the example and test servers of this repository are started.
package mcpserve

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

// EndpointPath is where the streamable HTTP endpoint is mounted.
const EndpointPath = "/mcp"

// ListeningPrefix starts the stderr line that announces the HTTP endpoint, so a
// parent process that asked for port 0 can learn the real URL.
const ListeningPrefix = "listening on "

// Options selects the transport.
type Options struct {
	HTTPAddr string    // "" = stdio; else listen here (port 0 picks a free port)
	Stdin    io.Reader // stdio transport
	Stdout   io.Writer // stdio transport
	Log      io.Writer // receives the "listening on" line
	// WrapHTTP, if set, wraps the MCP HTTP handler (fault injection in tests).
	WrapHTTP func(http.Handler) http.Handler
	// HTTPOptions are passed to mcp-go's streamable HTTP server.
	HTTPOptions []server.StreamableHTTPOption
}

// Serve serves s until ctx ends or the transport stops. Over HTTP it writes
// "listening on http://HOST:PORT/mcp" to o.Log once bound.
func Serve(ctx context.Context, s *server.MCPServer, o Options) error {
	if o.HTTPAddr == "" {
		err := server.NewStdioServer(s).Listen(ctx, o.Stdin, o.Stdout)
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
			return fmt.Errorf("serve stdio: %w", err)
		}
		return nil
	}
	ln, err := net.Listen("tcp", o.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.HTTPAddr, err)
	}
	opts := append([]server.StreamableHTTPOption{server.WithEndpointPath(EndpointPath)}, o.HTTPOptions...)
	var h http.Handler = server.NewStreamableHTTPServer(s, opts...)
	if o.WrapHTTP != nil {
		h = o.WrapHTTP(h)
	}
	return ServeHTTP(ctx, h, ln, o.Log)
}

// ServeHTTP serves h at EndpointPath on an already bound listener until ctx ends.
func ServeHTTP(ctx context.Context, h http.Handler, ln net.Listener, logw io.Writer) error {
	mux := http.NewServeMux()
	mux.Handle(EndpointPath, h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(logw, "%shttp://%s%s\n", ListeningPrefix, ln.Addr(), EndpointPath)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
		shutCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutCtx); err != nil {
			return fmt.Errorf("shut down http: %w", err)
		}
		return nil
	}
}
