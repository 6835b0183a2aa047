package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestTelemetryFlags(t *testing.T) {
	tests := []struct {
		name string
		o    telemetryOptions
		want string // "" when it starts
	}{
		{"nothing asked", telemetryOptions{}, ""},
		{"arguments without traces", telemetryOptions{TraceArguments: true}, "--trace-arguments applies to --otlp-endpoint only"},
		{"endpoint without scheme", telemetryOptions{OTLPEndpoint: "localhost:4318"}, `--otlp-endpoint: OTLP endpoint "localhost:4318": want an http:// or https:// URL`},
		{"metrics address without port", telemetryOptions{MetricsListen: "127.0.0.1"}, `--metrics-listen "127.0.0.1": address 127.0.0.1: missing port in address`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tel, err := tt.o.start(context.Background(), func(string) {})
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				defer tel.Close()
				if tel.Observer != nil || tel.Metrics != nil || tel.OnSync() != nil {
					t.Fatalf("telemetry started without being asked: %+v", tel)
				}
				return
			}
			var ee *exitError
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.As(err, &ee) || ee.code != exitUsage {
				t.Fatalf("err = %v, want usage error %q", err, tt.want)
			}
		})
	}
}

// --metrics-listen serves the registry on its own address, loopback for a
// bare :PORT, and stops with Close.
func TestMetricsListen(t *testing.T) {
	var lines []string
	o := telemetryOptions{MetricsListen: ":0"}
	tel, err := o.start(context.Background(), func(s string) { lines = append(lines, s) })
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tel.Addr.String(), "127.0.0.1:") {
		t.Fatalf("bare :PORT listens on %s, want loopback", tel.Addr)
	}
	if len(lines) != 1 || lines[0] != "planlock: metrics on http://"+tel.Addr.String()+"/metrics" {
		t.Fatalf("log %q", lines)
	}
	tel.Metrics.SetPlans(1, 0)
	tel.OnSync()(1e6)
	res, err := http.Get("http://" + tel.Addr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{`planlock_plans{state="loaded"} 1`, "planlock_state_sync_seconds_count 1", "go_goroutines"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if res, err := http.Post("http://"+tel.Addr.String()+"/metrics", "text/plain", nil); err != nil || res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics: %v %v", res.StatusCode, err)
	}
	tel.Close()
	if _, err := http.Get("http://" + tel.Addr.String() + "/metrics"); err == nil {
		t.Fatal("metrics still served after Close")
	}
}
