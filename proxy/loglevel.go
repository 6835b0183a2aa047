package proxy

import (
	"context"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Per-request log levels (protocol 2026-07-28). A modern client asks for
// the log messages of one request with a level in that request's _meta; a
// legacy client sets one for its session (logging/setLevel, mcp-go's
// default being error). Toward a modern upstream planlock sends, with each
// request it forwards, the level its client asked for that request (never
// the client's _meta as such), so the upstream sends log messages for
// requests that asked and for no other. routeLog gives a message to a
// modern client only while a call of it that asked at or below the
// message's level is in flight.

// requestedLogLevel is the log level the client of ctx asked for its
// request: a modern request's _meta level when it is one of the eight (an
// unknown one asks for nothing), a legacy session's level; "" for none.
func requestedLogLevel(ctx context.Context) mcp.LoggingLevel {
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		if knownLevel(info.LogLevel) {
			return info.LogLevel
		}
		return ""
	}
	if s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithLogging); ok {
		if l := s.GetLogLevel(); knownLevel(l) {
			return l
		}
	}
	return ""
}

// knownLevel reports whether l is one of the eight log levels.
func knownLevel(l mcp.LoggingLevel) bool { return l.ShouldSendTo(mcp.LoggingLevelDebug) }

// modernAsk is the log level a modern request of ctx asked for; "" for a
// legacy request or one that asked for none.
func modernAsk(ctx context.Context) mcp.LoggingLevel {
	if !server.IsModernRequest(ctx) {
		return ""
	}
	return requestedLogLevel(ctx)
}

// logAsks counts the calls in flight of the stdio client that asked for
// log messages in 2026-07-28, by level: over stdio a log message names no
// request, and it reaches a modern client only while one of them is in
// flight at or below the message's level.
type logAsks struct {
	mu sync.Mutex
	n  map[mcp.LoggingLevel]int
}

// track counts a call that asked for level until the returned func runs.
func (a *logAsks) track(level mcp.LoggingLevel) func() {
	a.mu.Lock()
	if a.n == nil {
		a.n = map[mcp.LoggingLevel]int{}
	}
	a.n[level]++
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		if a.n[level]--; a.n[level] == 0 {
			delete(a.n, level)
		}
		a.mu.Unlock()
	}
}

// wants reports whether a call in flight asked for messages of level.
func (a *logAsks) wants(level mcp.LoggingLevel) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for asked := range a.n {
		if level.ShouldSendTo(asked) {
			return true
		}
	}
	return false
}

// trackLogAsk is end, and counts the call of ctx in p.stdioAsks until it
// runs when it is a stdio client's modern request that asked for log
// messages.
func (p *Proxy) trackLogAsk(ctx context.Context, end func()) func() {
	if p.stdioProg == nil {
		return end
	}
	level := modernAsk(ctx)
	if level == "" {
		return end
	}
	untrack := p.stdioAsks.track(level)
	return func() {
		untrack()
		end()
	}
}

// inFlight counts a read or a get of ctx as a request in flight, as a tool
// call is (the calls in flight over HTTP, the log asks over stdio), until
// the returned func runs: its client may have asked for log messages.
func (p *Proxy) inFlight(ctx context.Context) func() {
	untrack := p.inflight.track(ctx)
	return p.trackLogAsk(ctx, untrack)
}
