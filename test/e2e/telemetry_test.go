//go:build e2e

package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/planlock/planlock/internal/telemetry/telemetrytest"
)

const telemetryPlan = `
plan "telemetry" {
  goal = "echo twice"
  step "say" {
    tool      = "echo"
    max_calls = 2
    arg "message" { max_length = 20 }
  }
}
`

// The real binary: --metrics-listen serves what the calls became on its own
// address, --otlp-endpoint exports one span per call to a collector, and
// the arguments stay out of both.
func TestProxyMetricsAndTraces(t *testing.T) {
	col := &telemetrytest.Collector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	c, _ := testUpstreamProxy(t, telemetryPlan, "--metrics-listen", "127.0.0.1:0", "--otlp-endpoint", srv.URL)

	calls := []struct {
		args    string
		allowed bool
	}{
		{`{"message":"secret-one"}`, true},
		{`{"message":"this message is far too long for the plan"}`, false},
		{`{"message":"secret-two"}`, true},
		{`{"message":"secret-three"}`, false}, // max_calls used up
	}
	for i, cl := range calls {
		if a := c.call("echo", cl.args); a.allowed() != cl.allowed {
			t.Fatalf("call %d: allowed %v, want %v: %s", i, a.allowed(), cl.allowed, a.text())
		}
	}

	m := regexp.MustCompile(`planlock: metrics on (http://\S+/metrics)`).FindStringSubmatch(c.stderr.String())
	if m == nil {
		t.Fatalf("no metrics address in the log:\n%s", c.stderr.String())
	}
	res, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{
		`planlock_calls_total{outcome="forwarded",plan="telemetry",rule="",step="say"} 2`,
		`planlock_calls_total{outcome="blocked",plan="telemetry",rule="args",step="say"} 1`,
		`planlock_calls_total{outcome="blocked",plan="telemetry",rule="max_calls",step="say"} 1`,
		`planlock_upstream_call_seconds_count{plan="telemetry",step="say"} 2`,
		`planlock_holds_open{plan="telemetry"} 0`,
		`planlock_plans{state="loaded"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if !regexp.MustCompile(`planlock_state_sync_seconds_count [1-9]`).Match(body) {
		t.Errorf("no journal fdatasync in the metrics")
	}
	if strings.Contains(string(body), "secret") {
		t.Fatal("an argument value reached the metrics")
	}

	// Spans are batched: SIGTERM flushes them.
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(col.Spans()) < len(calls) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	spans := col.Spans()
	if len(spans) != len(calls) {
		t.Fatalf("collector got %d spans, want %d", len(spans), len(calls))
	}
	outcomes := map[string]int{}
	for _, s := range spans {
		a := telemetrytest.Attrs(s)
		outcomes[a["planlock.outcome"]+"/"+a["planlock.rule"]]++
		for k, v := range a {
			if strings.Contains(v, "secret") {
				t.Fatalf("argument in span attribute %s=%s without --trace-arguments", k, v)
			}
		}
	}
	if outcomes["forwarded/"] != 2 || outcomes["blocked/args"] != 1 || outcomes["blocked/max_calls"] != 1 {
		t.Fatalf("span outcomes %v", outcomes)
	}
}
