package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/planlock/planlock/internal/authn"
	"github.com/planlock/planlock/internal/telemetry"
	"github.com/planlock/planlock/proxy"
)

type callRecorder struct {
	mu   sync.Mutex
	seen []string // plan/tool/outcome/rule/identity
}

func (c *callRecorder) StartCall(ctx context.Context, s proxy.CallStart) (context.Context, func(proxy.CallEnd)) {
	id, _ := authn.FromContext(ctx)
	return ctx, func(e proxy.CallEnd) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.seen = append(c.seen, strings.Join([]string{s.Plan, s.Tool, string(e.Outcome), e.Rule, id.Subject}, "/"))
	}
}

func (c *callRecorder) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.seen...)
}

func scrapeText(t *testing.T, m *telemetry.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// The gateway tells the metrics what it serves and refuses, watches each
// served plan's holds, and tells the observer of every plan's calls with
// the caller's identity.
func TestMetricsAndObserver(t *testing.T) {
	plans := t.TempDir()
	writePlan(t, plans, "alpha.hcl", planText("alpha", "first"))
	writePlan(t, plans, "beta.hcl", planText("beta", "second"))
	writePlan(t, plans, "broken.hcl", `plan "broken" { goal = `)
	m := telemetry.NewMetrics()
	rec := &callRecorder{}
	r := start(t, Config{PlansDir: plans, Metrics: m, Observer: rec,
		Authenticators: []authn.Authenticator{tokenFile(t, map[string]string{"tok": "ops *"})}})

	waitFor(t, "plans counted", func() bool {
		s := scrapeText(t, m)
		return strings.Contains(s, `planlock_plans{state="loaded"} 2`) && strings.Contains(s, `planlock_plans{state="refused"} 1`)
	})
	s := scrapeText(t, m)
	for _, want := range []string{`planlock_holds_open{plan="alpha"} 0`, `planlock_holds_open{plan="beta"} 0`} {
		if !strings.Contains(s, want) {
			t.Fatalf("metrics lack %s:\n%s", want, s)
		}
	}

	// One call: the upstream does not exist, so the call is neither sent
	// nor counted, observed with the caller.
	status, session, _ := initialize(t, r.url+"/mcp/alpha", "tok")
	if status != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d %q", status, session)
	}
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`
	req, _ := http.NewRequest("POST", r.url+"/mcp/alpha", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Set("Mcp-Session-Id", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitFor(t, "the call observed", func() bool { return len(rec.all()) == 1 })
	if got := rec.all()[0]; got != "alpha/echo/not_sent/upstream_unavailable/token:ops" {
		t.Fatalf("observed %q", got)
	}

	// A removed plan stops being served, counted and watched.
	if err := os.Remove(filepath.Join(plans, "beta.hcl")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "beta gone from the metrics", func() bool {
		s := scrapeText(t, m)
		return strings.Contains(s, `planlock_plans{state="loaded"} 1`) && !strings.Contains(s, `plan="beta"`)
	})
}
