package telemetry

import (
	"context"
	"fmt"
	"net/url"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/planlock/planlock/internal/authn"
	"github.com/planlock/planlock/proxy"
)

// TracingOptions configure OpenTelemetry traces. Tracing is off unless an
// endpoint is given.
type TracingOptions struct {
	// Endpoint is the OTLP/HTTP collector's base URL, e.g.
	// "http://localhost:4318" (spans go to /v1/traces unless the URL has a
	// path of its own).
	Endpoint string
	// WithArguments puts each call's arguments into its span. Off by
	// default: arguments may be personal data.
	WithArguments bool
	// ServiceName names the process in the traces; "" means "planlock".
	ServiceName string
	// Version is planlock's version, a resource attribute.
	Version string
}

// Tracing exports one span per tools/call over OTLP/HTTP.
type Tracing struct {
	tp       *sdktrace.TracerProvider
	tr       trace.Tracer
	withArgs bool
}

// NewTracing starts the OTLP exporter. Spans are batched; Shutdown flushes
// them.
func NewTracing(ctx context.Context, o TracingOptions) (*Tracing, error) {
	u, err := url.Parse(o.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("OTLP endpoint %q: want an http:// or https:// URL such as http://localhost:4318", o.Endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u.String()))
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter: %w", err)
	}
	return newTracing(sdktrace.NewBatchSpanProcessor(exp), o), nil
}

// newTracing builds the tracer over any span processor (tests use an
// in-memory one).
func newTracing(sp sdktrace.SpanProcessor, o TracingOptions) *Tracing {
	name := o.ServiceName
	if name == "" {
		name = "planlock"
	}
	res := resource.NewSchemaless(attribute.String("service.name", name), attribute.String("service.version", o.Version))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sp), sdktrace.WithResource(res))
	return &Tracing{tp: tp, tr: tp.Tracer("github.com/planlock/planlock"), withArgs: o.WithArguments}
}

// Shutdown flushes the spans not yet exported.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if err := t.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("traces: %w", err)
	}
	return nil
}

// StartCall opens the call's span; it ends with the gate's decision as
// attributes (proxy.CallObserver).
func (t *Tracing) StartCall(ctx context.Context, c proxy.CallStart) (context.Context, func(proxy.CallEnd)) {
	attrs := []attribute.KeyValue{
		attribute.String("planlock.plan", c.Plan),
		attribute.String("mcp.method.name", "tools/call"),
		attribute.String("gen_ai.tool.name", c.Tool),
	}
	if id, ok := authn.FromContext(ctx); ok {
		attrs = append(attrs, attribute.String("planlock.identity", id.Subject))
	}
	if t.withArgs {
		attrs = append(attrs, attribute.String("planlock.arguments", string(c.Args)))
	}
	ctx, span := t.tr.Start(ctx, "tools/call "+c.Tool, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	return ctx, func(e proxy.CallEnd) {
		span.SetAttributes(
			attribute.String("planlock.step", e.Step),
			attribute.String("planlock.outcome", string(e.Outcome)),
			attribute.String("planlock.rule", e.Rule),
		)
		if e.Upstream > 0 {
			span.SetAttributes(attribute.Float64("planlock.upstream.duration_ms", float64(e.Upstream.Microseconds())/1000))
		}
		switch e.Outcome {
		case proxy.OutcomeFailed, proxy.OutcomeNotSent:
			span.SetStatus(codes.Error, e.Rule)
		}
		span.End()
	}
}

// Observers tells every observer about each call, in order; nil ones are
// skipped, and no observer at all is nil.
func Observers(obs ...proxy.CallObserver) proxy.CallObserver {
	var m multi
	for _, o := range obs {
		if o != nil && !isNilPtr(o) {
			m = append(m, o)
		}
	}
	switch len(m) {
	case 0:
		return nil
	case 1:
		return m[0]
	}
	return m
}

func isNilPtr(o proxy.CallObserver) bool {
	switch v := o.(type) {
	case *Metrics:
		return v == nil
	case *Tracing:
		return v == nil
	}
	return false
}

type multi []proxy.CallObserver

func (m multi) StartCall(ctx context.Context, c proxy.CallStart) (context.Context, func(proxy.CallEnd)) {
	ends := make([]func(proxy.CallEnd), len(m))
	for i, o := range m {
		ctx, ends[i] = o.StartCall(ctx, c)
	}
	return ctx, func(e proxy.CallEnd) {
		for i := len(ends) - 1; i >= 0; i-- {
			ends[i](e)
		}
	}
}
