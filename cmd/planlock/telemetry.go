package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/planlock/planlock/internal/gateway"
	"github.com/planlock/planlock/internal/telemetry"
	"github.com/planlock/planlock/proxy"
)

// telemetryOptions are the metrics and tracing flags of proxy and serve.
type telemetryOptions struct {
	MetricsListen  string
	OTLPEndpoint   string
	TraceArguments bool
}

func (o *telemetryOptions) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "metrics-listen", Usage: "serve Prometheus metrics at http://`ADDR`/metrics (its own address, apart from the MCP endpoint; a bare :PORT means loopback)", Destination: &o.MetricsListen},
		&cli.StringFlag{Name: "otlp-endpoint", Usage: "export one trace span per tool call to the OTLP/HTTP collector at `URL` (e.g. http://localhost:4318); off by default", Destination: &o.OTLPEndpoint},
		&cli.BoolFlag{Name: "trace-arguments", Usage: "with --otlp-endpoint, put each call's arguments into its span (they may be personal data)", Destination: &o.TraceArguments},
	}
}

// runningTelemetry is what the flags started; its zero value observes
// nothing.
type runningTelemetry struct {
	Metrics  *telemetry.Metrics // nil without --metrics-listen
	Observer proxy.CallObserver // nil without either
	Addr     net.Addr           // where metrics are served
	stops    []func()
}

// OnSync feeds the state journal's fdatasync durations to the metrics.
func (t *runningTelemetry) OnSync() func(time.Duration) {
	if t.Metrics == nil {
		return nil
	}
	return t.Metrics.ObserveSync
}

// OnStateWritable feeds a plan's state's disk faults to the metrics (nil
// without them).
func (t *runningTelemetry) OnStateWritable(plan string) func(bool) {
	if t.Metrics == nil {
		return nil
	}
	t.Metrics.SetStateWritable(plan, true)
	return func(ok bool) { t.Metrics.SetStateWritable(plan, ok) }
}

// gatewayMetrics are the metrics planlock serve reports plans and holds to;
// nil (no interface holding a nil pointer) without --metrics-listen.
func (t *runningTelemetry) gatewayMetrics() gateway.Metrics {
	if t.Metrics == nil {
		return nil
	}
	return t.Metrics
}

// Close stops the metrics server and flushes the traces not yet sent.
func (t *runningTelemetry) Close() {
	for i := len(t.stops) - 1; i >= 0; i-- {
		t.stops[i]()
	}
}

// start starts what the flags ask for: the metrics server and the OTLP
// exporter.
func (o *telemetryOptions) start(ctx context.Context, errw func(string)) (*runningTelemetry, error) {
	t := &runningTelemetry{}
	if o.TraceArguments && o.OTLPEndpoint == "" {
		return nil, usageErrorf("--trace-arguments applies to --otlp-endpoint only")
	}
	var tracing *telemetry.Tracing
	if o.OTLPEndpoint != "" {
		tr, err := telemetry.NewTracing(ctx, telemetry.TracingOptions{Endpoint: o.OTLPEndpoint, WithArguments: o.TraceArguments, Version: shortVersion()})
		if err != nil {
			return nil, usageErrorf("--otlp-endpoint: %v", err)
		}
		tracing = tr
		t.stops = append(t.stops, func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := tr.Shutdown(sctx); err != nil {
				errw("planlock: " + err.Error())
			}
		})
	}
	if o.MetricsListen != "" {
		host, port, err := net.SplitHostPort(o.MetricsListen)
		if err != nil {
			t.Close()
			return nil, usageErrorf("--metrics-listen %q: %v", o.MetricsListen, err)
		}
		if host == "" {
			host = "127.0.0.1"
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
		if err != nil {
			t.Close()
			return nil, failf("--metrics-listen: %v", err)
		}
		t.Metrics, t.Addr = telemetry.NewMetrics(), ln.Addr()
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", t.Metrics.Handler())
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute}
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errw(fmt.Sprintf("planlock: metrics: %v", err))
			}
		}()
		t.stops = append(t.stops, func() { srv.Close(); <-done })
		errw(fmt.Sprintf("planlock: metrics on http://%s/metrics", ln.Addr()))
	}
	t.Observer = telemetry.Observers(t.Metrics, tracing)
	return t, nil
}
