package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/planlock/planlock/internal/boundedio"
	"github.com/planlock/planlock/internal/gcfloor"
	"github.com/planlock/planlock/internal/planrun"
	"github.com/planlock/planlock/proxy"
	"github.com/planlock/planlock/proxy/planload"
)

func proxyCommand() *cli.Command {
	o := &proxyOptions{}
	return &cli.Command{
		Name:      "proxy",
		Usage:     "run the MCP gate between an agent and an upstream MCP server",
		ArgsUsage: "[-- UPSTREAM_COMMAND ARGS...]",
		Description: `Serves the agent over stdio (default) or streamable HTTP (--listen) and
forwards to the upstream given after -- (stdio), by --upstream-url, or by the
plan's upstream block. Only the plan's tools are shown; every call is checked
against the plan and counted durably in --state before it is forwarded.

The plan must carry an approval signature the trust policy accepts (the same
flags as planlock verify; the bundle is PLAN.sigstore.json or --bundle), must
not be expired, and must not be older than a plan already loaded from the
same signed path (whatever its plan label). The plan file is read once;
those bytes are verified and parsed. When the plan or its bundle changes
on disk the proxy verifies it again and serves the new plan; one that does
not verify is logged and the last verified plan keeps serving.

Each plan has its own state directory under the state root, kept for what
was signed: its repository path and the trust policy (for a plan run with
--insecure-skip-verify, the plan file's absolute path), never for its plan
label (--state names one directory explicitly). Proxies of different plans
never share one; a directory of the layout per plan label is moved once.
When the proxy cannot start, it writes why to --log-file (default
<state>/proxy.log, the state root's before the plan is verified) and, over stdio, answers the client's initialize request
with a JSON-RPC error carrying the reason, since many clients show only
"connection closed".

With an operator config file holding the trust policy (see planlock config)
and an upstream block in the plan, the whole command is:

  planlock proxy --plan refund.hcl

With --mode observe (set by the operator only, never by a plan) the plan is
not enforced: every call the upstream offers is forwarded, nothing is
counted, and the audit log records what the plan would have decided
(would_allow, would_block, would_hold) for planlock plan suggest. An
unsigned plan still needs --insecure-skip-verify.

Examples:
   planlock proxy --plan plans/refund.hcl --key planlock.pub
   PLANLOCK_LISTEN_TOKEN=s3cret planlock proxy --plan plans/refund.hcl --key planlock.pub --listen 127.0.0.1:3001`,
		Flags:  o.flags(),
		Action: action(o, runProxy),
	}
}

// proxyOptions are the flags of planlock proxy.
type proxyOptions struct {
	cmdline
	planOptions // the plan and its trust policy
	stateOptions
	observeOptions
	repoOptions
	holdOptions
	telemetryOptions
	fileStateOptions // audit_rotate.go
	stateKeyOptions  // statekey.go
	ReloadInterval   time.Duration
	Listen           string
	AllowOrigin      cli.StringSlice
	InsecureNoAuth   bool
	UpstreamURL      string
	Env              cli.StringSlice
	Audit            string
	LogFile          string
	TokenFile        string
	AuditRedact      bool
	SyncEachCall     bool
	CallTimeout      time.Duration
	MaxMessageBytes  int
	// localDir is the plan's directory under the state root, once known.
	localDir string
	// startLn is the listener a start failure is answered on, when it was
	// open already (else --listen is bound again).
	startLn net.Listener
}

func (o *proxyOptions) flags() []cli.Flag {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "plan", Usage: "plan `FILE` (HCL), verified against the trust policy", Required: true, Destination: &o.Plan},
		&cli.BoolFlag{Name: "insecure-skip-verify", Usage: "run the plan without verifying its signature (unsafe; local experiments only)", Destination: &o.InsecureSkipVerify},
		&cli.StringFlag{Name: "bundle", Usage: "the plan's sigstore bundle `FILE` (default PLAN.sigstore.json)", TakesFile: true, Destination: &o.Bundle},
		&cli.StringFlag{Name: "path", Usage: "the plan's `PATH` in the repository, as signed (default: relative to the Git checkout)", Destination: &o.Path},
		&cli.DurationFlag{Name: "reload-interval", Value: time.Second, Usage: "look for a changed plan or bundle every `DURATION` (0: never reload)", Destination: &o.ReloadInterval},
		&cli.StringFlag{Name: "listen", Usage: "serve streamable HTTP on `ADDR` (e.g. 127.0.0.1:3001, path /mcp) instead of stdio; a bare :PORT means loopback", Destination: &o.Listen},
		&cli.StringSliceFlag{Name: "allow-origin", Usage: "with --listen, also accept requests whose Origin header is `ORIGIN` (scheme://host[:port], repeatable); other requests with an Origin are refused (403) unless it is the listen address", Destination: &o.AllowOrigin},
		&cli.BoolFlag{Name: "insecure-no-auth", Usage: "with --listen on a non-loopback address, serve without PLANLOCK_LISTEN_TOKEN (anyone who can reach it can call the planned tools)", Destination: &o.InsecureNoAuth},
		&cli.StringFlag{Name: "upstream-url", Usage: "streamable HTTP `URL` of the upstream", Destination: &o.UpstreamURL},
		&cli.StringSliceFlag{Name: "env", Usage: "pass environment variable `NAME` to a stdio upstream (repeatable)", Destination: &o.Env},
		&cli.StringFlag{Name: "audit", Usage: "audit log `FILE` (default <state>/audit.jsonl; not with --state postgres://...)", Destination: &o.Audit},
		&cli.StringFlag{Name: "log-file", Usage: "append why the proxy could not start (state in use, plan refused) to `FILE` (default <state>/proxy.log)", TakesFile: true, Destination: &o.LogFile},
		&cli.StringFlag{Name: "token-file", Usage: "with --listen: read the bearer token every request must carry from `FILE` (or set PLANLOCK_LISTEN_TOKEN)", TakesFile: true, Destination: &o.TokenFile},
		&cli.BoolFlag{Name: "audit-redact", Usage: "record the sha256 of the arguments instead of the arguments", Destination: &o.AuditRedact},
		&cli.BoolFlag{Name: "sync-each-call", Usage: "make each allowed call's audit record durable (fdatasync) before forwarding it, also for steps with many calls left (no count leases; slower with concurrent clients); with --state postgres://, every call in its own transaction", Destination: &o.SyncEachCall},
		&cli.DurationFlag{Name: "call-timeout", Value: 60 * time.Second, Usage: "timeout of each forwarded call", Destination: &o.CallTimeout},
		&cli.IntFlag{Name: "max-message-bytes", Value: proxy.DefaultMaxMessageBytes, Usage: "largest client message (stdio line or HTTP body) read; a larger one gets a JSON-RPC error", Destination: &o.MaxMessageBytes},
	}
	flags = append(flags, o.stateOptions.flags()...)
	flags = append(flags, o.observeOptions.flags()...)
	flags = append(flags, o.repoOptions.flags()...)
	flags = append(flags, o.trustOptions.flags()...)
	flags = append(flags, o.telemetryOptions.flags()...)
	flags = append(flags, o.fileStateOptions.flags()...)
	flags = append(flags, o.stateKeyOptions.flags()...)
	return append(flags, o.holdOptions.flags()...)
}

// listenToken is the HTTP bearer token: PLANLOCK_LISTEN_TOKEN or --token-file.
func (o *proxyOptions) listenToken() (string, error) {
	token := os.Getenv("PLANLOCK_LISTEN_TOKEN")
	f := o.TokenFile
	if f == "" {
		return token, nil
	}
	if token != "" {
		return "", usageErrorf("both PLANLOCK_LISTEN_TOKEN and --token-file give the listen token: give one")
	}
	b, err := boundedio.ReadFile(f, boundedio.MaxKeyBytes)
	if err != nil {
		return "", failf("--token-file: %v", err)
	}
	token = strings.TrimSpace(string(b))
	if token == "" || strings.ContainsAny(token, " \t\r\n") {
		return "", failf("--token-file %s: want one token on one line", f)
	}
	return token, nil
}

// loadPlan reads the plan file once; the signature (when verified) and the
// parser see the same bytes (package planload).
func loadPlan(ctx context.Context, src planload.Source, errw func(string)) (*planload.Loaded, error) {
	if src.Policy == nil {
		errw(planload.InsecureWarning(src.File))
	}
	l, err := src.Read(ctx, time.Now())
	if err != nil {
		return nil, failf("%v", err)
	}
	return l, nil
}

func oneLineDiags(s string) string { return strings.ReplaceAll(s, "\n", "; ") }

func runProxy(ctx context.Context, o *proxyOptions) error {
	started := false
	err := serveProxy(ctx, o, &started)
	if err != nil && !started {
		reportStartFailure(o, err) // proxy_start.go
	}
	return err
}

// serveProxy sets *started once it serves the client.
func serveProxy(ctx context.Context, o *proxyOptions, started *bool) error {
	errw := o.errw
	if o.MaxMessageBytes < 1024 {
		return usageErrorf("--max-message-bytes must be at least 1024, got %d", o.MaxMessageBytes)
	}
	src, repoSync, err := o.planSource(ctx) // proxy_repo.go
	if err != nil {
		return err
	}
	loaded, err := loadPlan(ctx, src, errw)
	if err != nil {
		return err
	}
	plan := loaded.Plan
	if loaded.Approval != nil {
		errw(fmt.Sprintf("planlock: plan %s verified: signed by %s at %s (plan %q, %s)", src.File, loaded.Approval.Signer.Identity,
			loaded.Approval.SignedAt.UTC().Format(time.RFC3339), plan.Name, plan.Digest))
	}
	// Checked before anything starts; the gate warns when it starts.
	if _, err := o.observe(false).For(plan, func(string) {}); err != nil {
		return runtimeErr(err)
	}
	args := o.Args
	if plan.Upstream != nil && len(args) > 0 && slices.Equal(plan.Upstream.Command, args) {
		// As mcp-config: the signed plan decides; repeating it is harmless.
		errw("planlock: note: the plan's upstream block already names this upstream; -- COMMAND is not needed")
		args = nil
	}
	up, err := planrun.Upstream(loaded, planrun.UpstreamGiven{Command: args, URL: o.UpstreamURL, Env: o.Env.Value()}, os.LookupEnv)
	if err != nil {
		return runtimeErr(err)
	}
	up.Stderr = o.IO.err
	var ln net.Listener
	token, err := o.listenToken()
	if err != nil {
		return err
	}
	front := proxy.HTTPOptions{}
	if addr := o.Listen; addr != "" {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return usageErrorf("--listen %q: %v", addr, err)
		}
		if host == "" {
			host = "127.0.0.1" // loopback unless an address is given explicitly
		}
		for _, origin := range o.AllowOrigin.Value() {
			n, err := proxy.NormalizeOrigin(origin)
			if err != nil {
				return usageErrorf("--allow-origin: %v", err)
			}
			front.AllowOrigins = append(front.AllowOrigins, n)
		}
		if err := checkListenAuth(host, token, o.InsecureNoAuth, errw); err != nil {
			return err
		}
		if token != "" {
			front.Tokens = []string{token}
		}
		ln, err = net.Listen("tcp", net.JoinHostPort(host, port))
		if err != nil {
			return failf("listen: %v", err)
		}
		defer func() {
			if o.startLn != ln { // kept for the start failure's answers
				ln.Close()
			}
		}()
	} else if len(o.AllowOrigin.Value()) > 0 || o.InsecureNoAuth {
		return usageErrorf("--allow-origin and --insecure-no-auth apply to --listen only")
	}
	tel, err := o.telemetryOptions.start(ctx, errw) // telemetry.go
	if err != nil {
		return err
	}
	defer tel.Close()
	so, err := o.proxyStateOptions(tel.OnSync(), tel.OnStateWritable(plan.Name)) // state.go
	if err != nil {
		return err
	}
	holds, err := o.holdOptions.holds(ctx, &o.cmdline, &o.trustOptions, "proxy", o.Plan) // proxy_holds.go
	if err != nil {
		return err
	}
	holds.RepoURL, holds.PlanPath = o.Repo, o.Path
	if o.typed("state") || o.typed("state-root") {
		// The holds commands read the same config file; a directory given
		// on the command line or in the environment must be passed on.
		holds.LocalWhere = func(dir string) string { return " --state " + shellQuote(dir) }
	}
	ro := planrun.Options{State: so, Holds: holds, Observe: o.observe(false), Upstream: up,
		CallTimeout: o.CallTimeout, MaxMessageBytes: o.MaxMessageBytes, Version: shortVersion(), Observer: tel.Observer,
		Reload: planrun.Reload{Source: src, Interval: o.ReloadInterval, Sync: repoSyncOf(repoSync), SyncInterval: o.RepoInterval},
		Log:    errw, LogWriter: o.IO.err}
	if tel.Metrics != nil {
		tel.Metrics.SetPlans(1, 0)
		ro.WatchHolds = tel.Metrics.WatchHolds
	}
	gate, err := planrun.Open(ctx, loaded, ro)
	if err != nil {
		return runtimeErr(err)
	}
	defer gate.Close()
	p := gate.Proxy
	*started = true
	// Collections every few MB allocated took a tenth of the CPU per call.
	defer gcfloor.Start(proxyGCHeadroom)()
	if ln != nil {
		errw(fmt.Sprintf("planlock: serving plan %q on http://%s/mcp", plan.Name, ln.Addr()))
		err = p.ServeListenerWith(ctx, ln, front)
	} else {
		err = p.ServeStdio(ctx, o.IO.in, o.IO.out)
	}
	if errors.Is(err, proxy.ErrStartRefused) {
		// The upstream refused for good before the client was served: a
		// start failure, answered to the client as any other (on the
		// listener clients already know, which nothing served yet).
		*started = false
		o.startLn = ln
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return failf("%v", err)
	}
	return nil
}

// repoSyncOf keeps a nil *planload.RepoSync a nil interface.
func repoSyncOf(rs *planload.RepoSync) interface {
	Run(context.Context, time.Duration)
} {
	if rs == nil {
		return nil
	}
	return rs
}

// runtimeErr is an error of the gate's runtime (internal/planrun) as the
// command's: a usage error (exit 2) or a failure (exit 1); an error of the
// command's own (a flag read while building) is kept as it is.
func runtimeErr(err error) error {
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		return ee
	case errors.Is(err, planrun.ErrUsage):
		return usageErrorf("%v", err)
	}
	return failf("%v", err)
}

// proxyGCHeadroom is how far above the live heap the proxy (and serve)
// lets its heap grow before a collection while the live heap is smaller
// (gcfloor).
const proxyGCHeadroom = 16 << 20

// gcEnv are the collector's variables, which turn gcfloor off.
var gcEnv = []envVar{
	{"GOGC", "set: the Go collector's pacing as given (else the heap may grow 16 MiB above the live heap before a collection)"},
	{"GOMEMLIMIT", "set: the Go collector's pacing is left as the runtime sets it"},
}

// proxyEnv are the variables the proxy reads.
func proxyEnv() []envVar {
	vars := []envVar{
		{"PLANLOCK_LISTEN_TOKEN", "with --listen: clients must send it as a bearer token"},
		stateEnv, tufCacheEnv, xdgConfigEnv,
	}
	vars = append(vars, gcEnv...)
	vars = append(vars, upstreamEnv...)
	vars = append(vars, pgEnv...)     // --state postgres://...
	return append(vars, githubEnv...) // hold pull requests
}

// checkListenAuth applies the rule for serving HTTP without a token: on
// loopback it is allowed (said once), elsewhere only with --insecure-no-auth
// (warned loudly).
func checkListenAuth(host, token string, noAuth bool, errw func(string)) error {
	ip := net.ParseIP(host)
	loopback := host == "localhost" || (ip != nil && ip.IsLoopback())
	switch {
	case token != "" && noAuth:
		return usageErrorf("--insecure-no-auth contradicts PLANLOCK_LISTEN_TOKEN: unset one of them")
	case token != "":
	case !loopback && !noAuth:
		return usageErrorf("--listen %s is not a loopback address and PLANLOCK_LISTEN_TOKEN is not set: set PLANLOCK_LISTEN_TOKEN to a secret token (clients send Authorization: Bearer TOKEN), or pass --insecure-no-auth to serve without authentication", host)
	case !loopback:
		errw("planlock: WARNING: --insecure-no-auth: serving on " + host + " WITHOUT AUTHENTICATION: anyone who can reach it can call the planned tools")
	default:
		errw("planlock: no PLANLOCK_LISTEN_TOKEN: serving on loopback " + host + " without authentication (any local process can call the planned tools)")
	}
	return nil
}
