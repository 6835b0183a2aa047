package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/planlock/planlock/internal/wire"
)

// Both protocol eras on the fast lanes. A tools/call of protocol 2026-07-28
// carries its era in _meta (protocol version, client capabilities, client
// info), and its result carries resultType and the server's identity. The
// lanes read _meta as mcp-go's server reads it (HandleMessage:
// extractRequestProtocolInfo, the header checks, the session state it
// synthesises) and decorate the result as it does (decorateResponse), so
// that a modern call costs what a legacy one does. What the server would
// answer with an error of its own (no client capabilities, an unsupported
// version, headers that do not match the body) is left to it.

// laneEra is a tools/call's era as the server reads it from _meta.
type laneEra struct {
	meta *mcp.Meta                   // the request's _meta; nil without one
	info *server.RequestProtocolInfo // nil without _meta
}

func (e laneEra) modern() bool { return e.info != nil && e.info.Modern }

// progress reports whether the client asked for progress notifications.
func (e laneEra) progress() bool { return e.meta != nil && e.meta.ProgressToken != nil }

// readLaneEra reads a tools/call's _meta (raw, nil when absent); false when
// the server would refuse the request for it.
func readLaneEra(raw json.RawMessage) (laneEra, bool) {
	if raw == nil {
		return laneEra{}, true
	}
	var meta *mcp.Meta
	if json.Unmarshal(raw, &meta) != nil {
		return laneEra{}, false // the server's decode of the params fails
	}
	version := meta.ProtocolVersion()
	if !mcp.IsModernProtocol(version) {
		return laneEra{meta: meta, info: &server.RequestProtocolInfo{ProtocolVersion: version}}, true
	}
	caps := meta.ClientCapabilities()
	if caps == nil || !mcp.IsValidProtocolVersion(version) {
		return laneEra{}, false
	}
	return laneEra{meta: meta, info: &server.RequestProtocolInfo{Modern: true, ProtocolVersion: version,
		ClientInfo: meta.ClientInfo(), LogLevel: meta.LogLevel(), ClientCapabilities: caps}}, true
}

// eraContext is ctx as the server hands it to the tool handler for a
// request of era e, with the session state a modern request synthesises
// (the handshake's, which that era does not have) and the note that the
// client is modern (the BeforeAny hook in New).
func (p *Proxy) eraContext(ctx context.Context, e laneEra) context.Context {
	if e.info == nil {
		return ctx
	}
	if e.info.Modern {
		if !p.stdioModern.Load() {
			p.stdioModern.Store(true)
		}
		if s := server.ClientSessionFromContext(ctx); s != nil {
			if ws, ok := s.(server.SessionWithClientInfo); ok {
				if e.info.ClientInfo != nil {
					ws.SetClientInfo(*e.info.ClientInfo)
				}
				ws.SetClientCapabilities(*e.info.ClientCapabilities)
			}
			if !s.Initialized() {
				s.Initialize()
			}
		}
	}
	return server.WithRequestProtocolInfo(ctx, e.info)
}

// modernHeaders reports whether a modern tools/call's headers agree with
// its body as the server checks them (validateModernRequest,
// validateStandardHeadersForMessage): the version in both, Mcp-Method,
// Mcp-Name and the tool's Mcp-Param-* headers.
func (p *Proxy) modernHeaders(h http.Header, e laneEra, tool string, params json.RawMessage) bool {
	v := h.Get(mcp.HeaderProtocolVersion)
	if h.Get(mcp.HeaderLastEventID) != "" || v != e.info.ProtocolVersion ||
		mcp.ValidateStandardHeaders(h.Get, v, mcp.MethodToolsCall, params) != nil {
		return false
	}
	t := p.srv.GetTool(tool)
	if t == nil {
		return false // the server answers an unknown tool
	}
	// A schema that names no x-mcp-header (not even escaped) binds no
	// header: spare the check's decode of the schema.
	if raw := t.Tool.RawInputSchema; len(raw) > 0 && !bytes.Contains(raw, []byte("x-mcp-header")) && !bytes.Contains(raw, []byte(`\u`)) {
		return true
	}
	return mcp.ValidateParamHeadersLookup(func(name string) (string, bool) {
		vs := h.Values(name)
		if len(vs) == 0 {
			return "", false
		}
		return vs[0], true
	}, &t.Tool, params) == nil
}

// laneSession is the session of a modern HTTP request on the lane: its own,
// for the request's life, as the server gives each modern request (an
// ephemeral session with no ID). Notifications for the call go on its
// response (httpCall), never through this session's channel.
type laneSession struct {
	notifications chan mcp.JSONRPCNotification
	stdioSession
}

func newLaneSession() *laneSession {
	return &laneSession{notifications: make(chan mcp.JSONRPCNotification, 1)}
}

func (s *laneSession) SessionID() string { return "" }

func (s *laneSession) NotificationChannel() chan<- mcp.JSONRPCNotification {
	return s.notifications
}

// modernResult is res as the server decorates a modern request's result:
// resultType "complete" unless it has one, and the server's identity in
// _meta unless it names one. res itself is not changed.
func (p *Proxy) modernResult(res *mcp.CallToolResult) *mcp.CallToolResult {
	r := *res
	if r.ResultType == "" {
		r.ResultType = mcp.ResultTypeComplete
	}
	if r.Meta == nil || r.Meta.ServerInfo() == nil {
		m := &mcp.Meta{}
		if r.Meta != nil {
			m.ProgressToken, m.AdditionalFields = r.Meta.ProgressToken, maps.Clone(r.Meta.AdditionalFields)
		}
		m.SetServerInfo(p.serverInfo)
		r.Meta = m
	}
	return &r
}

// appendEraResult is wire.AppendToolResult for a request of either era: a
// modern request's plain result (content, structuredContent, isError) is
// written with its decoration in the order the server's encoding gives
// (its members sorted: _meta, content, isError, resultType,
// structuredContent), without a second encoding of its content.
func (p *Proxy) appendEraResult(b []byte, res *mcp.CallToolResult, modern bool) ([]byte, error) {
	if !modern {
		return wire.AppendToolResult(b, res)
	}
	if res.Meta != nil || res.ResultType != "" || len(res.InputRequests) > 0 || res.RequestState != "" ||
		(len(res.RawStructuredContent) == 0 && res.StructuredContent != nil) || p.serverInfoJSON == nil {
		return wire.AppendToolResult(b, p.modernResult(res))
	}
	b = append(b, `{"_meta":{"`+mcp.MetaKeyServerInfo+`":`...)
	b = append(b, p.serverInfoJSON...)
	b, err := wire.AppendContent(append(b, `},"content":`...), res.Content)
	if err != nil {
		return b, err
	}
	if res.IsError {
		b = append(b, `,"isError":true`...)
	}
	b = append(b, `,"resultType":"complete"`...)
	if len(res.RawStructuredContent) > 0 {
		b = append(b, `,"structuredContent":`...)
		b = append(b, res.RawStructuredContent...)
	}
	return append(b, '}'), nil
}
