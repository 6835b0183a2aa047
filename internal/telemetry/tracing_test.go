package telemetry

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/planlock/planlock/internal/authn"
	"github.com/planlock/planlock/internal/telemetry/telemetrytest"
	"github.com/planlock/planlock/proxy"
)

func exportCalls(t *testing.T, withArgs bool) (*telemetrytest.Collector, []*tracepb.Span) {
	t.Helper()
	col := &telemetrytest.Collector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	tr, err := NewTracing(context.Background(), TracingOptions{Endpoint: srv.URL, WithArguments: withArgs, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := authn.WithIdentity(context.Background(), authn.Identity{Subject: "token:ci-bot"})
	_, end := tr.StartCall(ctx, proxy.CallStart{Plan: "refund", Tool: "refund_customer", Args: []byte(`{"iban":"DE89370400440532013000"}`)})
	end(proxy.CallEnd{Step: "refund", Outcome: proxy.OutcomeForwarded, Upstream: 12 * time.Millisecond})
	_, end = tr.StartCall(context.Background(), proxy.CallStart{Plan: "refund", Tool: "drop_database", Args: []byte(`{}`)})
	end(proxy.CallEnd{Outcome: proxy.OutcomeNotSent, Rule: proxy.RuleUpstreamDown})
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := col.Spans()
	if len(spans) != 2 {
		t.Fatalf("collector got %d spans, want 2", len(spans))
	}
	return col, spans
}

func TestTracesCarryTheDecisionNotTheArguments(t *testing.T) {
	col, spans := exportCalls(t, false)
	if col.Paths()[0] != "/v1/traces" {
		t.Fatalf("exported to %q, want /v1/traces", col.Paths()[0])
	}
	a := telemetrytest.Attrs(spans[0])
	want := map[string]string{
		"planlock.plan": "refund", "gen_ai.tool.name": "refund_customer", "planlock.step": "refund",
		"planlock.outcome": "forwarded", "planlock.identity": "token:ci-bot", "planlock.upstream.duration_ms": "number",
	}
	for k, v := range want {
		if a[k] != v {
			t.Errorf("span attribute %s = %q, want %q", k, a[k], v)
		}
	}
	if spans[0].GetName() != "tools/call refund_customer" || spans[0].GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("span %q kind %v", spans[0].GetName(), spans[0].GetKind())
	}
	for _, s := range spans {
		for k, v := range telemetrytest.Attrs(s) {
			if strings.Contains(k, "argument") || strings.Contains(v, "DE89") {
				t.Fatalf("argument exported without being asked: %s=%s", k, v)
			}
		}
	}
	b := telemetrytest.Attrs(spans[1])
	if b["planlock.outcome"] != "not_sent" || b["planlock.rule"] != proxy.RuleUpstreamDown || spans[1].GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("not-sent span: %v status %v", b, spans[1].GetStatus())
	}
	if _, ok := b["planlock.identity"]; ok {
		t.Errorf("a call without identity got one: %v", b)
	}
}

func TestTracesCarryArgumentsWhenAsked(t *testing.T) {
	_, spans := exportCalls(t, true)
	if got := telemetrytest.Attrs(spans[0])["planlock.arguments"]; got != `{"iban":"DE89370400440532013000"}` {
		t.Fatalf("arguments attribute %q", got)
	}
}

func TestTracingEndpointMustBeHTTP(t *testing.T) {
	for _, ep := range []string{"", "localhost:4318", "grpc://collector:4317", "http://", "ftp://x"} {
		if _, err := NewTracing(context.Background(), TracingOptions{Endpoint: ep}); err == nil {
			t.Errorf("endpoint %q accepted", ep)
		}
	}
}

type countObs struct{ started, ended *int }

func (c countObs) StartCall(ctx context.Context, _ proxy.CallStart) (context.Context, func(proxy.CallEnd)) {
	*c.started++
	return ctx, func(proxy.CallEnd) { *c.ended++ }
}

func TestObserversTellEachOnce(t *testing.T) {
	var s1, e1, s2, e2 int
	var nilMetrics *Metrics
	if Observers(nil, nilMetrics) != nil {
		t.Fatal("no observer should be nil")
	}
	o := Observers(countObs{&s1, &e1}, nil, countObs{&s2, &e2})
	_, end := o.StartCall(context.Background(), proxy.CallStart{})
	end(proxy.CallEnd{})
	if s1 != 1 || e1 != 1 || s2 != 1 || e2 != 1 {
		t.Fatalf("started %d,%d ended %d,%d", s1, s2, e1, e2)
	}
}
