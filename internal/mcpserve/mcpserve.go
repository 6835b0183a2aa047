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

// Serve serves s until ctx ends or the transport stops. With httpAddr == "" it
// speaks stdio on in/out; otherwise it listens on httpAddr (port 0 picks a free
// port) and writes "listening on http://HOST:PORT/mcp" to logw once bound.
func Serve(ctx context.Context, s *server.MCPServer, httpAddr string, in io.Reader, out, logw io.Writer) error {
	if httpAddr == "" {
		err := server.NewStdioServer(s).Listen(ctx, in, out)
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
			return fmt.Errorf("serve stdio: %w", err)
		}
		return nil
	}
	ln, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", httpAddr, err)
	}
	return ServeListener(ctx, s, ln, logw)
}

// ServeListener serves streamable HTTP on an already bound listener.
func ServeListener(ctx context.Context, s *server.MCPServer, ln net.Listener, logw io.Writer) error {
	h := server.NewStreamableHTTPServer(s, server.WithEndpointPath(EndpointPath))
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
		_ = h.Shutdown(shutCtx)
		if err := srv.Shutdown(shutCtx); err != nil {
			return fmt.Errorf("shut down http: %w", err)
		}
		return nil
	}
}
