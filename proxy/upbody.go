package proxy

import (
	"fmt"
	"io"
	"mime"
	"net/http"
)

// limitBodies bounds what the HTTP upstream's answers may make the proxy
// read: a JSON body at most max bytes, an SSE stream at most max bytes per
// event (the stream itself may last). Past that the read fails, so the
// request fails with errUpstreamTooLarge and what mcp-go buffered of it is
// garbage; the connection is closed rather than drained.
func limitBodies(base http.RoundTripper, max int) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := base.RoundTrip(r)
		if err != nil || resp.Body == nil || r.Method == http.MethodDelete {
			return resp, err
		}
		mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		resp.Body = &limitedBody{rc: resp.Body, max: max, sse: mt == "text/event-stream"}
		return resp, nil
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// limitedBody counts what was read: all of it, or for SSE what was read
// since the last blank line (an event's end).
type limitedBody struct {
	rc   io.ReadCloser
	max  int
	sse  bool
	n    int  // bytes of the current body or event
	nl   bool // SSE: the last byte other than '\r' was '\n'
	fail error
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.fail != nil {
		return 0, b.fail
	}
	if room := b.max - b.n + 1; len(p) > room && room > 0 {
		p = p[:room] // read no more than one byte past the limit
	}
	n, err := b.rc.Read(p)
	if !b.sse {
		b.n += n
	} else {
		for _, c := range p[:n] {
			switch {
			case c == '\r':
			case c == '\n' && b.nl:
				b.n = 0 // an event ended
			case c == '\n':
				b.nl = true
				b.n++
			default:
				b.nl = false
				b.n++
			}
		}
	}
	if b.n > b.max {
		b.fail = fmt.Errorf("%w", errUpstreamTooLarge{max: b.max})
		_ = b.rc.Close()
		return 0, b.fail
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
