package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/internal/oneline"
)

// The upstream's era (protocol 2026-07-28, "Versioning and Compatibility").
// A modern upstream has no initialize: every request carries its protocol
// version, client identity and capabilities in _meta (and over HTTP the
// Mcp-Method and Mcp-Name headers); a legacy one is initialised once per
// connection. planlock probes with server/discover as the stdio binding
// says (over HTTP the probe's 400 body tells the era the same way), falls
// back to initialize on anything that is not a modern error, and takes
// -32022 (unsupported protocol version) for what it is: the upstream is
// modern, and its data.supported names what it speaks.

// A dual-era upstream (one that names a legacy version planlock speaks
// next to a modern one) is initialised in its legacy era, the cheaper one
// per call, unless the plan has input rules (UpstreamConfig.PreferModern):
// an upstream's multi-round requests reach the gate as input_required
// results only in 2026-07-28 (in the legacy era they would be
// server-to-client requests, which planlock refuses), so then it is spoken
// to in 2026-07-28. An upstream that speaks no legacy version planlock
// speaks is spoken to in 2026-07-28 always.

// discoverProbeTimeout bounds the server/discover probe over stdio: a
// legacy server may ignore an unknown method before initialize instead of
// answering it.
const discoverProbeTimeout = 5 * time.Second

// ErrStartRefused marks a definite refusal of the upstream (no protocol
// version in common): retrying cannot help, so the upstream is not
// restarted and the proxy does not start.
var ErrStartRefused = errors.New("upstream refused")

// startRefusal is a definite refusal of the upstream (ErrStartRefused);
// its message is one line naming the upstream and the versions on both
// sides.
type startRefusal struct{ msg string }

func (e *startRefusal) Error() string        { return e.msg }
func (e *startRefusal) Is(target error) bool { return target == ErrStartRefused }

// ourVersions are the protocol versions planlock speaks to an upstream,
// newest first.
var ourVersions = mcp.ValidProtocolVersions

// name is the upstream as the user named it, for error messages.
func (u *Upstream) name() string {
	if u.cfg.URL != "" {
		return u.cfg.URL
	}
	if len(u.cfg.Command) > 0 {
		return oneline.Of(strings.Join(u.cfg.Command, " "), 120)
	}
	return "upstream"
}

func (u *Upstream) refusal(format string, args ...any) error {
	return &startRefusal{msg: fmt.Sprintf("upstream %s: ", u.name()) + fmt.Sprintf(format, args...) +
		fmt.Sprintf("; planlock speaks %s", strings.Join(ourVersions, ", "))}
}

// unsupportedVersions is data.supported of a -32022 error, or nil when err
// is no such error.
func unsupportedVersions(err error) ([]string, bool) {
	var re *RPCError
	if !errors.As(err, &re) || re.Code != mcp.UNSUPPORTED_PROTOCOL_VERSION {
		return nil, false
	}
	var d struct {
		Supported []string `json:"supported"`
	}
	_ = json.Unmarshal(re.Data, &d)
	return d.Supported, true
}

// mutual is the newest version both planlock and supported speak whose era
// is modern (or legacy when modern is false), "" when there is none.
func mutual(supported []string, modern bool) string {
	for _, v := range ourVersions {
		if mcp.IsModernProtocol(v) == modern && slices.Contains(supported, v) {
			return v
		}
	}
	return ""
}

// negotiated is the outcome of the probe.
type negotiated struct {
	version string          // modern version chosen; "" means initialize
	legacy  string          // the legacy version to ask for in initialize
	caps    json.RawMessage // a modern upstream's capabilities
}

// probe sends server/discover and reads the upstream's era from its answer.
// A transport failure (the process died, the URL is unreachable) is
// returned as is; any answer that is not a modern one means legacy.
func (u *Upstream) probe(ctx context.Context, c *upConn) (negotiated, error) {
	want := mcp.LATEST_PROTOCOL_VERSION
	modernFirst := u.cfg.PreferModern != nil && u.cfg.PreferModern()
	for attempt := 0; attempt < 2; attempt++ {
		// Over HTTP every POST is answered (a legacy server answers an
		// unknown method with an error or a 4xx), so the probe waits as
		// long as initialize would: on a loaded machine a modern server
		// slower than the stdio bound is still modern, never taken for a
		// legacy one (and then refused for answering initialize in its era).
		timeout := u.cfg.InitTimeout
		if u.cfg.URL == "" {
			timeout = min(discoverProbeTimeout, timeout)
		}
		pctx, cancel := context.WithTimeout(ctx, timeout)
		c.version = want
		h, isHTTP := c.tr.(transport.HTTPConnection)
		if isHTTP {
			h.SetProtocolVersion(want) // the header must match the _meta
		}
		res, err := u.sendID(pctx, c, u.probeID.Add(-1), string(mcp.MethodServerDiscover), map[string]any{})
		cancel()
		c.version = ""
		if isHTTP {
			h.SetProtocolVersion("")
		}
		if err == nil {
			var d struct {
				SupportedVersions []string        `json:"supportedVersions"`
				Capabilities      json.RawMessage `json:"capabilities"`
			}
			if json.Unmarshal(res, &d) != nil || len(d.SupportedVersions) == 0 {
				return negotiated{legacy: mcp.LATEST_LEGACY_PROTOCOL_VERSION}, nil // not a DiscoverResult: not modern
			}
			if v := mutual(d.SupportedVersions, false); v != "" && !(modernFirst && mutual(d.SupportedVersions, true) != "") {
				return negotiated{legacy: v}, nil // dual-era: its legacy era (see above)
			}
			if v := mutual(d.SupportedVersions, true); v != "" {
				return negotiated{version: v, caps: d.Capabilities}, nil
			}
			return negotiated{}, u.refusal("server/discover names protocol versions %s", quoteList(d.SupportedVersions))
		}
		if supported, ok := unsupportedVersions(err); ok {
			// Dual-era: its legacy era (see above), unless the plan prefers
			// the modern one; that is asked for once more, then given up.
			if v := mutual(supported, false); v != "" && (!modernFirst || attempt > 0 || mutual(supported, true) == "") {
				return negotiated{legacy: v}, nil
			}
			// A refusal naming the very version asked for is asked once
			// more (the spec's "retry with a supported version"; a server
			// may refuse a first request before its state is ready); a
			// second one is definite.
			if v := mutual(supported, true); v != "" && (v != want || attempt == 0) {
				want = v
				continue
			}
			return negotiated{}, u.refusal("it refused protocol version %s and supports %s", want, quoteList(supported))
		}
		var re *RPCError
		switch {
		case errors.As(err, &re), errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			return negotiated{legacy: mcp.LATEST_LEGACY_PROTOCOL_VERSION}, nil // a legacy server's answer, or none
		case u.cfg.URL != "" && (httpRefusedStatus(err) || errors.Is(err, transport.ErrSessionTerminated)):
			return negotiated{legacy: mcp.LATEST_LEGACY_PROTOCOL_VERSION}, nil // a 4xx without a JSON-RPC body
		}
		return negotiated{}, fmt.Errorf("initialize upstream: server/discover: %w", err)
	}
	return negotiated{}, u.refusal("it refused every protocol version it named")
}

// httpRefusedStatus reports whether err is mcp-go's "request failed with
// status 4xx" for an answer whose body is no JSON-RPC message: what a
// legacy server may answer a request it does not know.
func httpRefusedStatus(err error) bool {
	return strings.Contains(err.Error(), "request failed with status 4")
}

func quoteList(vs []string) string {
	if len(vs) == 0 {
		return "none"
	}
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = oneline.Of(v, 40)
	}
	return strings.Join(q, ", ")
}

// ourCapabilities are the client capabilities planlock declares to a
// modern upstream: its own, never the agent's. A request whose step may
// relay input requests declares those the plan allows and the client
// declared (inputCapabilities, multiround.go); every other declares none
// of elicitation, sampling or roots.
var ourCapabilities = json.RawMessage(`{}`)

// modernParams is params with the _meta a modern upstream requires:
// planlock's protocol version, identity and capabilities replace whatever
// the client put under those keys, and the log level is level (the one
// the client asked for, requestedLogLevel; "" for none), never what the
// params carried; the rest of its _meta (a progress token) stays.
func (u *Upstream) modernParams(params json.RawMessage, version string, caps json.RawMessage, level mcp.LoggingLevel) (json.RawMessage, error) {
	p := bytes.TrimSpace(params)
	if caps == nil && !bytes.Contains(p, []byte(`"_meta"`)) && !bytes.Contains(p, []byte(`\u`)) {
		// No _meta of the client's to merge (no key can spell it, not
		// even escaped): planlock's goes in front of the members, which
		// costs a copy and not a decode, on every call of the fast lanes.
		if len(p) == 0 || string(p) == "null" {
			p = []byte("{}")
		}
		if p[0] != '{' || p[len(p)-1] != '}' {
			return nil, errors.New("params of a modern request must be an object")
		}
		meta, err := u.ourMeta(version)
		if err != nil {
			return nil, err
		}
		rest := bytes.TrimSpace(p[1:])
		b := make([]byte, 0, len(p)+len(meta)+64)
		b = append(b, `{"_meta":`...)
		if level != "" {
			b = append(append(b, meta[:len(meta)-1]...), `,"`+mcp.MetaKeyLogLevel+`":`...)
			b = append(strconv.AppendQuote(b, string(level)), "},"...)
		} else {
			b = append(append(b, meta...), ',')
		}
		if len(rest) == 1 { // "}": no members
			b = b[:len(b)-1]
		}
		return append(b, rest...), nil
	}
	fields := map[string]json.RawMessage{}
	if p := bytes.TrimSpace(params); len(p) > 0 && string(p) != "null" {
		if err := json.Unmarshal(p, &fields); err != nil {
			return nil, fmt.Errorf("params of a modern request must be an object: %w", err)
		}
	}
	meta := map[string]json.RawMessage{}
	if m, ok := fields["_meta"]; ok && string(bytes.TrimSpace(m)) != "null" {
		if err := json.Unmarshal(m, &meta); err != nil {
			return nil, fmt.Errorf("params._meta must be an object: %w", err)
		}
	}
	delete(meta, mcp.MetaKeyLogLevel)
	if level != "" {
		l, _ := json.Marshal(level)
		meta[mcp.MetaKeyLogLevel] = l
	}
	v, _ := json.Marshal(version)
	meta[mcp.MetaKeyProtocolVersion] = v
	meta[mcp.MetaKeyClientCapabilities] = ourCapabilities
	if caps != nil {
		meta[mcp.MetaKeyClientCapabilities] = caps
	}
	info, err := json.Marshal(mcp.Implementation{Name: u.cfg.ClientName, Version: u.cfg.ClientVersion})
	if err != nil {
		return nil, err
	}
	if u.cfg.ClientName != "" {
		meta[mcp.MetaKeyClientInfo] = info
	} else {
		delete(meta, mcp.MetaKeyClientInfo)
	}
	m, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	fields["_meta"] = m
	return json.Marshal(fields)
}

// rememberHeaderTools keeps, for a modern HTTP connection, the listed
// tools whose input schema asks for Mcp-Param-* headers (x-mcp-header), so
// that a call of one carries them. A tool whose annotations break the
// rules gets none: the upstream refuses its calls (HeaderMismatch).
func (u *Upstream) rememberHeaderTools(c *upConn, raw []json.RawMessage) {
	if c.version == "" || u.cfg.URL == "" {
		return
	}
	m := map[string]*mcp.Tool{}
	for _, r := range raw {
		if !bytes.Contains(r, []byte("x-mcp-header")) {
			continue
		}
		var tool mcp.Tool
		if json.Unmarshal(r, &tool) != nil || mcp.ValidateParamHeaderAnnotations(&tool) != nil {
			continue
		}
		if len(mcp.ExtractParamHeaderBindings(&tool)) > 0 {
			m[tool.Name] = &tool
		}
	}
	c.headerTools.Store(&m)
}

// ourMeta is the _meta planlock declares to a modern upstream, encoded
// once per version (read only: callers copy it).
func (u *Upstream) ourMeta(version string) ([]byte, error) {
	if c := u.metaCache.Load(); c != nil && c.version == version {
		return c.b, nil
	}
	m := map[string]any{mcp.MetaKeyProtocolVersion: version, mcp.MetaKeyClientCapabilities: ourCapabilities}
	if u.cfg.ClientName != "" {
		m[mcp.MetaKeyClientInfo] = mcp.Implementation{Name: u.cfg.ClientName, Version: u.cfg.ClientVersion}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode _meta: %w", err)
	}
	u.metaCache.Store(&cachedMeta{version: version, b: b})
	return b, nil
}

type cachedMeta struct {
	version string
	b       []byte
}

// modernRequest turns req into a modern one for c's version: _meta in
// its params and, for HTTP, the standard headers (and a tool's
// Mcp-Param-* headers) derived from that body, never from the client's.
func (u *Upstream) modernRequest(c *upConn, req *transport.JSONRPCRequest, caps json.RawMessage, level mcp.LoggingLevel) error {
	version := c.version
	var raw json.RawMessage
	switch p := req.Params.(type) {
	case nil:
	case json.RawMessage:
		raw = p
	default:
		b, err := json.Marshal(p)
		if err != nil {
			return fmt.Errorf("encode params: %w", err)
		}
		raw = b
	}
	params, err := u.modernParams(raw, version, caps, level)
	if err != nil {
		return fmt.Errorf("%s: %w", req.Method, err)
	}
	req.Params = params
	if u.cfg.URL != "" {
		h := http.Header{}
		for k, v := range mcp.StandardHeaders(version, mcp.MCPMethod(req.Method), params) {
			h.Set(k, v)
		}
		if tools := c.headerTools.Load(); tools != nil && req.Method == string(mcp.MethodToolsCall) {
			var call struct {
				Name string `json:"name"`
			}
			if json.Unmarshal(params, &call) == nil {
				if tool := (*tools)[call.Name]; tool != nil {
					for k, v := range mcp.GenerateParamHeaders(tool, params) {
						h.Set(k, v)
					}
				}
			}
		}
		req.Header = h
	}
	return nil
}

// Refused is the upstream's definite refusal (ErrStartRefused) once the
// supervisor gave up on it, else nil.
func (u *Upstream) Refused() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.conn == nil && errors.Is(u.lastErr, ErrStartRefused) {
		return u.lastErr
	}
	return nil
}
