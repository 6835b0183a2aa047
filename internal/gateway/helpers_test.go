package gateway

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sgsign "github.com/sigstore/sigstore-go/pkg/sign"

	"github.com/planlock/planlock/internal/authn"
	"github.com/planlock/planlock/internal/statedir"
	"github.com/planlock/planlock/internal/testkit/peers"
	"github.com/planlock/planlock/proxy/planload"
	"github.com/planlock/planlock/sign"
)

// stateOf is the state directory of the unverified plan file
// <plans>/<name>.hcl under state: kept for the file's absolute path.
func stateOf(state, plans, name string) string {
	return filepath.Join(state, statedir.Name(planload.Identity{Path: filepath.Join(plans, name+".hcl")}))
}

// keys are a PEM key pair made by the real openssl command.
type keys struct {
	kp     sgsign.Keypair
	policy *sign.Policy
}

func opensslKeys(t testing.TB, dir, name string) keys {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	priv, pubFile := filepath.Join(dir, name+".key"), filepath.Join(dir, name+".pub")
	for _, args := range [][]string{
		{"genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", priv},
		{"pkey", "-in", priv, "-pubout", "-out", pubFile},
	} {
		if out, err := exec.Command("openssl", args...).CombinedOutput(); err != nil {
			t.Fatalf("openssl %v: %v\n%s", args, err, out)
		}
	}
	var k keys
	var err error
	if k.kp, err = sign.LoadSigningKey(context.Background(), priv, os.ReadFile); err != nil {
		t.Fatal(err)
	}
	pubPEM, err := os.ReadFile(pubFile)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := sign.ParsePublicKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	if k.policy, err = sign.NewPolicy(sign.PolicyOptions{PublicKey: pub}); err != nil {
		t.Fatal(err)
	}
	return k
}

// install writes a plan file and its bundle, signed by k at the given time
// as the plan at plans/<base of file>. The bundle is written first, then the
// plan, each by rename, as a deployment does.
func (k keys) install(t testing.TB, file, content string, at time.Time) {
	t.Helper()
	s, err := sign.Sign(context.Background(), []byte(content), sign.Predicate{Kind: sign.KindPlan, Path: "plans/" + filepath.Base(file)},
		sign.SignOptions{Keypair: k.kp, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	replace(t, sign.BundlePath(file), s.Bundle)
	replace(t, file, []byte(content))
}

func replace(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// running is a gateway serving on a loopback port for one test.
type running struct {
	g    *Gateway
	url  string
	log  *peers.SyncBuffer
	stop func()
}

// start serves cfg (PlansDir, StateDir and a fast reload filled in when
// empty) until the test ends, once the first load is done.
func start(t testing.TB, cfg Config) *running {
	t.Helper()
	if cfg.StateDir == "" {
		cfg.StateDir = t.TempDir()
	}
	if cfg.ReloadInterval == 0 {
		cfg.ReloadInterval = 20 * time.Millisecond
	}
	lb := &peers.SyncBuffer{}
	cfg.Log = slog.New(slog.NewTextHandler(lb, nil))
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx, ln) }()
	r := &running{g: g, url: "http://" + ln.Addr().String(), log: lb}
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(r.stop)
	waitFor(t, "the first load", func() bool { return strings.Contains(lb.String(), "plans loaded") })
	return r
}

// waitFor polls cond; the deadline guards against a hang, it is not a
// speed assertion.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// digest is the digest of the plan served under name ("" when none).
func (r *running) digest(name string) string {
	r.g.mu.RLock()
	defer r.g.mu.RUnlock()
	if e := r.g.byName[name]; e != nil {
		return e.proxy.Plan().Digest
	}
	return ""
}

// tokenFile writes a token file binding each token to its plans.
func tokenFile(t testing.TB, lines map[string]string) *authn.Tokens {
	t.Helper()
	var b strings.Builder
	for tok, rest := range lines {
		b.WriteString(authn.HashToken(tok) + " " + rest + "\n")
	}
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	toks, err := authn.LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	return toks
}

// initialize sends an MCP initialize request with the bearer token and
// returns the response status and session id.
func initialize(t testing.TB, url, token string) (int, string, http.Header) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), resp.Header
}
