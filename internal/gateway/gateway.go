// Package gateway is planlock serve: many verified plans behind one HTTP
// listener, each at /mcp/<plan name> with its own upstream, counts, holds
// and audit chain, every request authenticated and bound to the plans its
// identity may use.
//
// Each plan is a single-plan proxy (package proxy) with its own ledger in
// <state>/<plan name>; the gateway adds only what many plans need: finding
// the plan files, loading them with the same verification and no-downgrade
// rules as planlock proxy (package planload), routing, authentication and
// health.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/planlock/planlock/internal/authn"
	"github.com/planlock/planlock/internal/planrun"
	"github.com/planlock/planlock/internal/telemetry"
	"github.com/planlock/planlock/proxy"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/proxy/planload"
	"github.com/planlock/planlock/sign"
)

// Config configures a Gateway.
type Config struct {
	// PlansDir holds the plan files (*.hcl, each with its bundle
	// <file>.sigstore.json next to it). Files are read directly in it, not
	// in subdirectories.
	PlansDir string
	// RepoDir is the plans directory's path in the repository the plans
	// are signed from ("plans"); a plan file F is verified as signed at
	// RepoDir/F. Empty: each file's path in its Git checkout (sign.RepoPath).
	RepoDir string
	// Policy verifies every plan; nil serves plans unverified (loudly).
	Policy *sign.Policy
	// StateDir holds one state directory per signed path and trust policy
	// (internal/statedir), never per plan name.
	StateDir string
	// Authenticators are asked in turn who is calling (authn).
	Authenticators []authn.Authenticator
	// Challenge is the WWW-Authenticate value of a 401 refusing err; nil
	// means `Bearer realm="planlock"`. An OAuth front adds resource_metadata
	// here, and error="invalid_token" when credentials were refused.
	Challenge func(r *http.Request, err error) string
	// Routes are extra handlers served without authentication (for example
	// /.well-known/oauth-protected-resource), by http.ServeMux pattern.
	Routes map[string]http.Handler
	// HTTP are the front's options (origins, timeouts); Tokens is unused.
	HTTP proxy.HTTPOptions
	// ReloadInterval is how often the plans directory and files are looked
	// at; zero means one second.
	ReloadInterval time.Duration
	// DrainTimeout bounds how long Serve waits for calls in flight at
	// shutdown; zero means 30s.
	DrainTimeout time.Duration
	// Observer, when set, is told what became of every plan's calls
	// (metrics, traces).
	Observer proxy.CallObserver
	// Metrics, when set, is told how many plans are served and refused,
	// and reads each served plan's open holds.
	Metrics Metrics
	// Ledger are the options of every plan's ledger; Dir is set per plan.
	// Redact, SyncEachCall, StateKey and AcceptUnkeyedState also apply to
	// a PostgreSQL State.
	Ledger ledger.Options
	// State, a postgres:// URL, keeps every plan served in that database
	// (counted apart by plan digest), their local files (hold requests,
	// Git caches) under StateDir. Empty: each plan's state is a
	// directory under StateDir.
	State string
	// Holds, when set, approves held calls as planlock proxy does: pull
	// requests on the repository the plan files are checked out from (or
	// RepoURL), else holds kept in the state and approved with planlock
	// holds approve. PlanFile, PlanPath and the logs are set per plan. Nil:
	// holds are kept in the state only.
	Holds *planrun.HoldOptions
	// Observe is the operator's observe mode, for every plan (AnyPlan:
	// each plan observes the steps it has among Observe.Steps).
	Observe planrun.ObserveOptions
	// LookupEnv gives the variables a plan's upstream block names; nil
	// means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// UpstreamStderr receives the stdio upstreams' stderr; nil discards.
	UpstreamStderr func(plan string) *slog.Logger
	CallTimeout    time.Duration
	// MaxMessageBytes bounds one request body; zero means the proxy's default.
	MaxMessageBytes int
	Version         string
	Log             *slog.Logger
	// Now is the clock for expiry; nil means time.Now.
	Now func() time.Time

	beforeRead func(file string) // tests: a write between the scan's look and the read
}

// Gateway serves the plans. Create it with New, then Serve.
type Gateway struct {
	cfg Config
	log *slog.Logger

	mu      sync.RWMutex
	byName  map[string]*entry  // plans served
	byFile  map[string]*entry  // the same, by file
	refused map[string]refusal // files not served, by file
	// run is the context upstreams live in; set by Serve.
	run context.Context

	scanMu sync.Mutex
	scanSt scanState

	readyMu   sync.Mutex
	lastReady string // what /readyz last found, to log changes only
}

// entry is one served plan.
type entry struct {
	name   string
	file   string
	gate   *planrun.Gate // its state, hold approvals and reloader
	proxy  *proxy.Proxy
	mount  *proxy.Mounted
	stop   context.CancelFunc // the plan's upstream and reloader
	stable fileSums           // what the file looked like when loaded
	// unwatch stops reporting the plan's open holds (Config.Metrics).
	unwatch func()
	// inflight counts the requests handed to the plan; Add only while the
	// entry is in the maps (under Gateway.mu), so that once removed its
	// count only falls.
	inflight sync.WaitGroup
}

// refusal is a plan file that is not served, and why.
type refusal struct {
	sums fileSums
	why  string
	name string // the plan's name when it could be read
}

// New checks the configuration; nothing is loaded until Serve.
func New(cfg Config) (*Gateway, error) {
	if cfg.PlansDir == "" || cfg.StateDir == "" {
		return nil, errors.New("gateway: a plans directory and a state directory are required")
	}
	if len(cfg.Authenticators) == 0 {
		return nil, errors.New("gateway: at least one authenticator is required")
	}
	if cfg.ReloadInterval <= 0 {
		cfg.ReloadInterval = time.Second
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 30 * time.Second
	}
	if cfg.LookupEnv == nil {
		cfg.LookupEnv = os.LookupEnv
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Gateway{cfg: cfg, log: cfg.Log, byName: map[string]*entry{}, byFile: map[string]*entry{}, refused: map[string]refusal{}}, nil
}

// Serve loads the plans, serves them on ln until ctx ends, then drains the
// calls in flight (up to DrainTimeout) and closes every plan's ledger, so
// each call's outcome is written.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener) error {
	run, stopAll := context.WithCancel(context.WithoutCancel(ctx))
	defer stopAll()
	g.run = run
	g.scan(true)
	g.logLoaded()

	h, err := g.Handler(ln.Addr())
	if err != nil {
		return err
	}
	o := g.cfg.HTTP.Defaults()
	hs := &http.Server{Handler: h, ReadHeaderTimeout: o.ReadHeaderTimeout, IdleTimeout: o.IdleTimeout,
		ErrorLog: slog.NewLogLogger(g.log.Handler(), slog.LevelWarn)}

	scanCtx, stopScan := context.WithCancel(ctx)
	defer stopScan()
	scanDone := make(chan struct{})
	go func() {
		defer close(scanDone)
		t := time.NewTicker(g.cfg.ReloadInterval)
		defer t.Stop()
		for {
			select {
			case <-scanCtx.Done():
				return
			case <-t.C:
				g.scan(false)
			}
		}
	}()

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	var serveErr error
	select {
	case err := <-errc:
		serveErr = fmt.Errorf("serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	stopScan() // also when the listener failed
	<-scanDone
	g.log.Info("shutting down: draining calls in flight", "timeout", g.cfg.DrainTimeout.String())
	dctx, cancel := context.WithTimeout(context.Background(), g.cfg.DrainTimeout)
	defer cancel()
	// The MCP sessions end first (their streams would keep Shutdown
	// waiting), then the listener stops and the requests in flight finish.
	g.mu.RLock()
	for _, e := range g.byName {
		_ = e.mount.Shutdown(dctx)
	}
	g.mu.RUnlock()
	if err := hs.Shutdown(dctx); err != nil {
		g.log.Warn("calls still in flight at the drain timeout were cut off", "err", err)
		_ = hs.Close()
	}
	g.mu.Lock()
	entries := make([]*entry, 0, len(g.byName))
	for _, e := range g.byName {
		entries = append(entries, e)
	}
	g.byName, g.byFile = map[string]*entry{}, map[string]*entry{}
	g.mu.Unlock()
	for _, e := range entries {
		g.closeEntry(e)
	}
	g.log.Info("stopped")
	return serveErr
}

// Metrics is what the gateway reports besides each call
// (*telemetry.Metrics has it).
type Metrics interface {
	SetPlans(served, refused int)
	WatchHolds(plan string, holds telemetry.HoldLister) (stop func())
}

// reportPlans tells the metrics how many plans are served and refused.
func (g *Gateway) reportPlans() {
	if g.cfg.Metrics == nil {
		return
	}
	g.mu.RLock()
	served, refused := len(g.byName), len(g.refused)
	g.mu.RUnlock()
	g.cfg.Metrics.SetPlans(served, refused)
}

// logLoaded says once what is served after the first load.
func (g *Gateway) logLoaded() {
	names := g.Plans()
	refused := g.Refused()
	g.log.Info("plans loaded", "served", len(names), "plans", strings.Join(names, ","), "refused", len(refused))
	if len(names) > 0 {
		return
	}
	// Nothing to serve: say why in one line, with the way out, since the
	// per-file lines may be far above and /readyz only says 503.
	if len(refused) == 0 {
		g.log.Warn(fmt.Sprintf("no plan served: no plan file (*.hcl) in %s; /readyz answers 503 until a plan is served", g.cfg.PlansDir),
			"state", g.cfg.StateDir)
		return
	}
	files := make([]string, 0, len(refused))
	for f := range refused {
		files = append(files, f)
	}
	sort.Strings(files)
	whys := make([]string, 0, len(files))
	for _, f := range files {
		whys = append(whys, f+": "+refused[f])
	}
	g.log.Warn(fmt.Sprintf("no plan served: every plan file was refused (%s); /readyz answers 503 until a plan is served. State is kept under %s: a plan refused as a downgrade (a plan signed earlier for the same path was already served from there) runs with another state root: give --state DIR",
		strings.Join(whys, "; "), g.cfg.StateDir), "state", g.cfg.StateDir)
}

// Plans are the names of the plans served, sorted.
func (g *Gateway) Plans() []string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	names := make([]string, 0, len(g.byName))
	for n := range g.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Refused are the plan files not served, with why, by file.
func (g *Gateway) Refused() map[string]string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	m := map[string]string{}
	for f, r := range g.refused {
		m[f] = r.why
	}
	return m
}

// Handler is the gateway's HTTP handler for a listener at addr: the shared
// front (deadlines, origin), health endpoints, extra routes, and
// /mcp/<plan> behind authentication.
func (g *Gateway) Handler(addr net.Addr) (http.Handler, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", g.healthz)
	mux.HandleFunc("GET /readyz", g.readyz)
	for pattern, h := range g.cfg.Routes {
		mux.Handle(pattern, h)
	}
	mux.HandleFunc("/mcp/{plan}", g.serveMCP)
	return proxy.Front(g.cfg.HTTP, addr, mux)
}

// serveMCP authenticates the request, then hands it to its plan. A plan
// that is not served and a plan the identity is not bound to get the same
// 404, so that an identity learns nothing of the plans it may not use.
func (g *Gateway) serveMCP(w http.ResponseWriter, r *http.Request) {
	id, err := g.authenticate(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", g.challenge(r, err))
		g.log.Info("request refused: not authenticated", "path", r.URL.Path, "remote", r.RemoteAddr, "why", err.Error())
		http.Error(w, "planlock: missing, unknown or invalid credentials", http.StatusUnauthorized)
		return
	}
	name := r.PathValue("plan")
	g.mu.RLock()
	e := g.byName[name]
	if e != nil && id.MayUse(name) {
		e.inflight.Add(1)
		defer e.inflight.Done()
	}
	g.mu.RUnlock()
	switch {
	case e == nil:
		g.log.Info("request refused: "+g.whyNotServed(name), "plan", name, "caller", id.Subject)
		http.NotFound(w, r)
		return
	case !id.MayUse(name):
		g.log.Info("request refused: the caller is not bound to the plan", "plan", name, "caller", id.Subject)
		http.NotFound(w, r)
		return
	}
	e.mount.ServeHTTP(w, r.WithContext(authn.WithIdentity(r.Context(), id)))
}

// whyNotServed is the one-line reason a plan name is not served.
func (g *Gateway) whyNotServed(name string) string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	for f, r := range g.refused {
		if r.name == name || strings.TrimSuffix(filepath.Base(f), ".hcl") == name {
			return fmt.Sprintf("plan %q is refused: %s", name, r.why)
		}
	}
	return fmt.Sprintf("no plan %q is served", name)
}

// authenticate asks each Authenticator in turn; the first that knows the
// request decides.
func (g *Gateway) authenticate(r *http.Request) (authn.Identity, error) {
	for _, a := range g.cfg.Authenticators {
		id, err := a.Authenticate(r)
		if errors.Is(err, authn.ErrNoCredentials) {
			continue
		}
		if err != nil {
			return authn.Identity{}, err
		}
		if id.Subject == "" {
			return authn.Identity{}, errors.New("authenticator returned an identity without a subject")
		}
		return id, nil
	}
	return authn.Identity{}, authn.ErrNoCredentials
}

func (g *Gateway) challenge(r *http.Request, err error) string {
	if g.cfg.Challenge != nil {
		return g.cfg.Challenge(r, err)
	}
	return `Bearer realm="planlock"`
}

// upstreamOf is the plan's upstream as its signed upstream block says.
func (g *Gateway) upstreamOf(l *planload.Loaded) (proxy.UpstreamConfig, error) {
	plan := l.Plan
	if plan.Upstream == nil || (len(plan.Upstream.Command) == 0 && plan.Upstream.URL == "") {
		return proxy.UpstreamConfig{}, fmt.Errorf("plan %q has no upstream block; planlock serve takes each plan's upstream from the signed plan", plan.Name)
	}
	up, err := planrun.Upstream(l, planrun.UpstreamGiven{}, g.cfg.LookupEnv)
	if err != nil {
		return up, err
	}
	if g.cfg.UpstreamStderr != nil {
		up.Stderr = &logWriter{log: g.cfg.UpstreamStderr(plan.Name)}
	}
	return up, nil
}
