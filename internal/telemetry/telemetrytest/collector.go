// Package telemetrytest is an OTLP/HTTP trace receiver for tests: it
// decodes what the real OpenTelemetry exporter sends, as an OpenTelemetry
// Collector's otlphttp receiver would, and keeps the spans.
package telemetrytest

import (
	"compress/gzip"
	"io"
	"net/http"
	"sync"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Collector is an http.Handler receiving OTLP/HTTP protobuf trace exports.
type Collector struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	paths []string
}

func (c *Collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(io.LimitReader(body, 64<<20))
	if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want an OTLP protobuf body", http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.paths = append(c.paths, r.URL.Path)
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			c.spans = append(c.spans, ss.GetSpans()...)
		}
	}
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

// Spans are the spans received so far.
func (c *Collector) Spans() []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*tracepb.Span(nil), c.spans...)
}

// Paths are the URL paths exports were posted to.
func (c *Collector) Paths() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.paths...)
}

// Attrs are a span's attributes as strings ("number" for numbers, whose
// values depend on timing).
func Attrs(s *tracepb.Span) map[string]string {
	m := map[string]string{}
	for _, kv := range s.GetAttributes() {
		switch x := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = x.StringValue
		case *commonpb.AnyValue_DoubleValue, *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = "number"
		default:
			m[kv.GetKey()] = "?"
		}
	}
	return m
}
