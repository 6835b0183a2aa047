package gateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/planlock/planlock/internal/authn"
	"github.com/planlock/planlock/sign"
)

// planText is a plan whose upstream is a program that does not exist: the
// tests here never reach an upstream (initialize is answered by planlock).
func planText(name, goal string) string {
	return fmt.Sprintf(`plan %q {
  goal  = %q
  order = "any"
  upstream {
    command = ["/nonexistent/planlock-test-upstream"]
  }
  step "say" {
    tool      = "echo"
    max_calls = 2
  }
}
`, name, goal)
}

func writePlan(t *testing.T, dir, file, content string) {
	t.Helper()
	replace(t, filepath.Join(dir, file), []byte(content))
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRouting: who reaches which plan. An identity not bound to a plan gets
// the same 404 as for a plan that does not exist; the log says which.
func TestRouting(t *testing.T) {
	plans := t.TempDir()
	writePlan(t, plans, "alpha.hcl", planText("alpha", "first"))
	writePlan(t, plans, "beta.hcl", planText("beta", "second"))
	writePlan(t, plans, "broken.hcl", `plan "broken" { goal = `)
	writePlan(t, plans, "alpha_test.hcl", `test "not a plan" {}`) // a plan's tests: not loaded
	writePlan(t, plans, "noup.hcl", strings.Replace(planText("noup", "x"), `upstream {
    command = ["/nonexistent/planlock-test-upstream"]
  }`, "", 1))
	toks := tokenFile(t, map[string]string{
		"tok-a": "a alpha", "tok-ab": "ab alpha,beta", "tok-c": "c gamma", "tok-all": "all *",
	})
	r := start(t, Config{PlansDir: plans, Authenticators: []authn.Authenticator{toks},
		Challenge: func(*http.Request, error) string {
			return `Bearer resource_metadata="https://example.test/.well-known/oauth-protected-resource"`
		}})
	if got := r.g.Plans(); !slices.Equal(got, []string{"alpha", "beta"}) {
		t.Fatalf("served %v, want alpha and beta", got)
	}
	refused := r.g.Refused()
	if len(refused) != 2 {
		t.Errorf("refused %v, want broken.hcl and noup.hcl only", refused)
	}
	if !strings.Contains(refused[filepath.Join(plans, "broken.hcl")], "not valid") ||
		!strings.Contains(refused[filepath.Join(plans, "noup.hcl")], "no upstream block") {
		t.Fatalf("refused = %v", refused)
	}
	if code, _ := get(t, r.url+"/healthz"); code != 200 {
		t.Fatalf("/healthz: %d", code)
	}
	if code, body := get(t, r.url+"/readyz"); code != 200 || !strings.Contains(body, `"plans":2`) {
		t.Fatalf("/readyz before any upstream started: %d %s", code, body)
	}

	tests := []struct {
		token, plan string
		want        int
	}{
		{"", "alpha", 401},
		{"unknown", "alpha", 401},
		{"tok-a", "alpha", 200},
		{"tok-a", "beta", 404},   // served, not bound
		{"tok-a", "nope", 404},   // not served
		{"tok-a", "broken", 404}, // refused
		{"tok-ab", "alpha", 200},
		{"tok-ab", "beta", 200},
		{"tok-c", "alpha", 404},
		{"tok-c", "gamma", 404}, // bound, but no such plan
		{"tok-all", "beta", 200},
	}
	for _, tc := range tests {
		code, sid, h := initialize(t, r.url+"/mcp/"+tc.plan, tc.token)
		if code != tc.want {
			t.Errorf("token %q, plan %s: HTTP %d, want %d", tc.token, tc.plan, code, tc.want)
		}
		if code == 401 && !strings.Contains(h.Get("WWW-Authenticate"), "resource_metadata=") {
			t.Errorf("401 without the challenge hook's WWW-Authenticate: %q", h.Get("WWW-Authenticate"))
		}
		if code == 200 && sid == "" {
			t.Errorf("token %q, plan %s: no session id", tc.token, tc.plan)
		}
	}
	log := r.log.String()
	for _, want := range []string{
		`msg="request refused: the caller is not bound to the plan" plan=beta caller=token:a`,
		`msg="request refused: no plan \"nope\" is served" plan=nope caller=token:a`,
		`plan \"broken\" is refused: plan ` + filepath.Join(plans, "broken.hcl") + ` is not valid`,
		`msg="request refused: not authenticated"`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s:\n%s", want, log)
		}
	}

	// The 404 bodies do not tell a served plan from an unknown one.
	body404 := func(plan string) string {
		req, _ := http.NewRequest("POST", r.url+"/mcp/"+plan, strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer tok-a")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return fmt.Sprint(resp.StatusCode, string(b))
	}
	if a, b := body404("beta"), body404("nope"); a != b {
		t.Errorf("unbound plan answers %q, unknown plan %q", a, b)
	}

	// A session belongs to the identity that created it.
	_, sid, _ := initialize(t, r.url+"/mcp/alpha", "tok-ab")
	req, _ := http.NewRequest("POST", r.url+"/mcp/alpha", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer tok-a")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("another identity's session: HTTP %d, want 404", resp.StatusCode)
	}

	// alpha's upstream was started by the requests above and cannot run.
	if code, _ := get(t, r.url+"/readyz"); code != 503 {
		t.Errorf("/readyz with an upstream that cannot start: %d, want 503", code)
	}
	waitFor(t, "the not-ready log line", func() bool {
		return strings.Contains(r.log.String(), "not ready: plan alpha: upstream unavailable")
	})
}

// TestReload: plans added, replaced and removed while serving; a plan that
// does not pass never replaces the one serving.
func TestReload(t *testing.T) {
	keyDir := t.TempDir()
	k, other := opensslKeys(t, keyDir, "trusted"), opensslKeys(t, keyDir, "other")
	plans := t.TempDir()
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	k.install(t, filepath.Join(plans, "alpha.hcl"), planText("alpha", "v1"), t0)
	toks := tokenFile(t, map[string]string{"tok": "ops *"})
	r := start(t, Config{PlansDir: plans, RepoDir: "plans", Policy: k.policy, Authenticators: []authn.Authenticator{toks}})
	d1 := r.digest("alpha")
	if d1 == "" {
		t.Fatalf("alpha not served; log:\n%s", r.log.String())
	}
	count := func(s string) int { return strings.Count(r.log.String(), s) }
	notLoaded := func(step string, install func()) {
		t.Helper()
		n := count("was NOT loaded")
		install()
		waitFor(t, step+" refused", func() bool { return count("was NOT loaded") > n })
		if got := r.digest("alpha"); got != d1 {
			t.Fatalf("%s: alpha now serves %s, want the old %s", step, got, d1)
		}
	}
	alpha := filepath.Join(plans, "alpha.hcl")
	notLoaded("a plan signed by an untrusted key", func() { other.install(t, alpha, planText("alpha", "v2"), t0.Add(time.Hour)) })
	notLoaded("an older plan", func() { k.install(t, alpha, planText("alpha", "v3"), t0.Add(-time.Hour)) })
	notLoaded("another plan's name", func() { k.install(t, alpha, planText("omega", "v4"), t0.Add(time.Hour)) })
	if !strings.Contains(r.log.String(), `the file now holds plan \"omega\" instead of \"alpha\"`) {
		t.Errorf("log lacks the name change refusal:\n%s", r.log.String())
	}

	k.install(t, alpha, planText("alpha", "v5"), t0.Add(2*time.Hour))
	waitFor(t, "the newer plan", func() bool { d := r.digest("alpha"); return d != d1 && d != "" })

	// Added: a good plan is served, a bad one refused (404, reason in the
	// log), and served once it is fixed.
	k.install(t, filepath.Join(plans, "gamma.hcl"), planText("gamma", "g"), t0)
	other.install(t, filepath.Join(plans, "delta.hcl"), planText("delta", "d"), t0)
	waitFor(t, "gamma served, delta refused", func() bool {
		_, refused := r.g.Refused()[filepath.Join(plans, "delta.hcl")]
		return r.digest("gamma") != "" && refused
	})
	if code, _, _ := initialize(t, r.url+"/mcp/delta", "tok"); code != 404 {
		t.Fatalf("refused plan: HTTP %d, want 404", code)
	}
	if !strings.Contains(r.log.String(), `plan \"delta\" is refused: plan `+filepath.Join(plans, "delta.hcl")+` refused`) {
		t.Errorf("log lacks delta's refusal:\n%s", r.log.String())
	}
	k.install(t, filepath.Join(plans, "delta.hcl"), planText("delta", "d"), t0)
	waitFor(t, "delta served once fixed", func() bool { return r.digest("delta") != "" })

	// Removed: no longer served; its state stays for the audit.
	for _, f := range []string{"gamma.hcl", "gamma.hcl.sigstore.json"} {
		if err := os.Remove(filepath.Join(plans, f)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "gamma removed", func() bool { return r.digest("gamma") == "" })
	if code, _, _ := initialize(t, r.url+"/mcp/gamma", "tok"); code != 404 {
		t.Fatalf("removed plan: HTTP %d, want 404", code)
	}
	if got := r.g.Plans(); !slices.Equal(got, []string{"alpha", "delta"}) {
		t.Fatalf("served %v, want alpha and delta", got)
	}

	// The no-downgrade mark survives removal: gamma back with an older
	// signature than the one served before is refused.
	k.install(t, filepath.Join(plans, "gamma.hcl"), planText("gamma", "g-old"), t0.Add(-2*time.Hour))
	waitFor(t, "the older gamma refused", func() bool {
		_, refused := r.g.Refused()[filepath.Join(plans, "gamma.hcl")]
		return refused
	})
	if r.digest("gamma") != "" {
		t.Fatal("an older gamma was served after removal")
	}
}

// A listener that fails ends Serve with the error (and closes the plans'
// state) instead of leaving it waiting for a shutdown.
func TestServeReturnsWhenTheListenerFails(t *testing.T) {
	plans := t.TempDir()
	writePlan(t, plans, "alpha.hcl", planText("alpha", "first"))
	g, err := New(Config{PlansDir: plans, StateDir: t.TempDir(), Authenticators: []authn.Authenticator{tokenFile(t, map[string]string{"t": "a *"})}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	done := make(chan error, 1)
	go func() { done <- g.Serve(context.Background(), ln) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "serve 127.0.0.1") {
			t.Fatalf("Serve = %v, want the listener's error", err)
		}
	case <-time.After(60 * time.Second): // a hang guard, not a speed assertion
		t.Fatal("Serve did not return after its listener failed")
	}
	if got := g.Plans(); len(got) != 0 {
		t.Fatalf("plans still served after Serve returned: %v", got)
	}
}

// A plan file written again between the scans' look and the read is not
// served from that read: without a signature a half-written file can
// parse, and only a file seen stable may be served.
func TestAddIgnoresAWriteDuringTheRead(t *testing.T) {
	plans := t.TempDir()
	beta := filepath.Join(plans, "beta.hcl")
	partial := strings.Replace(planText("beta", "b"), "max_calls = 2", "max_calls = 200", 1)
	var reads atomic.Int32
	toks := tokenFile(t, map[string]string{"tok": "ops *"})
	r := start(t, Config{PlansDir: plans, Authenticators: []authn.Authenticator{toks},
		beforeRead: func(file string) {
			if file == beta && reads.Add(1) == 1 {
				replace(t, beta, []byte(partial))
			}
		}})
	replace(t, beta, []byte(planText("beta", "b")))
	waitFor(t, "beta served", func() bool { return r.digest("beta") != "" })
	if got, want := r.digest("beta"), "sha256:"+sign.Digest([]byte(partial)); got != want {
		t.Fatalf("beta serves %s, want the file on disk (%s)", got, want)
	}
	if reads.Load() < 2 {
		t.Fatal("beta was served from the read the write landed in")
	}
}
