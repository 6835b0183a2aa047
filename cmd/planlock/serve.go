package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/internal/authn"
	"github.com/planlock/planlock/internal/gateway"
	"github.com/planlock/planlock/internal/gcfloor"
	"github.com/planlock/planlock/internal/planrun"
	"github.com/planlock/planlock/proxy"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/proxy/planload"
	"github.com/planlock/planlock/sign"
)

// serveOptions are the flags of planlock serve.
type serveOptions struct {
	cmdline
	trustOptions
	Plans, PlansPath, Listen, State, Tokens, LogFormat string
	StateRoot, Repo, RepoBranch                        string
	RepoInterval                                       time.Duration
	AllowOrigin                                        cli.StringSlice
	InsecureSkipVerify, AuditRedact, SyncEachCall      bool
	ReloadInterval, CallTimeout, DrainTimeout          time.Duration
	MaxMessageBytes                                    int
	stateKeyOptions                                    // statekey.go
	fileStateOptions                                   // audit_rotate.go: each plan's journal, as the proxy's
	holdOptions                                        // proxy_holds.go: the proxy's hold flags
	observeOptions                                     // proxy_observe.go: the proxy's observe flags
	oauthOptions                                       // serve_oauth.go
	telemetryOptions                                   // telemetry.go
}

func (o *serveOptions) flags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "plans", Usage: "serve the plans (*.hcl with their .sigstore.json bundles) in `DIR`; with --repo, the directory's path in the repository", Required: true, TakesFile: true, Destination: &o.Plans},
		&cli.StringFlag{Name: "repo", Usage: "take the plans in --plans from the default branch of Git `URL` and their bundles from the approvals branch; fetch when either moves", Category: repoCategory, Destination: &o.Repo},
		&cli.DurationFlag{Name: "repo-interval", Value: 30 * time.Second, Usage: "ask the --repo remote whether a branch moved every `DURATION`", Category: repoCategory, Destination: &o.RepoInterval},
		&cli.StringFlag{Name: "repo-branch", Usage: "`BRANCH` the plans are read from (default: the remote's default branch)", Category: repoCategory, Destination: &o.RepoBranch},
		&cli.StringFlag{Name: "plans-path", Usage: "the plans directory's `PATH` in the repository the plans are signed from, e.g. plans (default: each file's path in its Git checkout)", Destination: &o.PlansPath},
		&cli.StringFlag{Name: "listen", Usage: "serve HTTP on `ADDR` (e.g. 127.0.0.1:8080; a bare :PORT means loopback)", Required: true, Destination: &o.Listen},
		&cli.StringFlag{Name: "state", Usage: "`DIR` holding one state directory per plan (default: $XDG_STATE_HOME/planlock, else ~/.local/state/planlock), or a postgres:// URL holding the state of every plan served (see planlock state migrate)", TakesFile: true, Destination: &o.State},
		&cli.StringFlag{Name: "state-root", Usage: "with --state postgres://..., the `DIR` keeping each plan's local files (hold requests, Git caches; default: $XDG_STATE_HOME/planlock, else ~/.local/state/planlock)", TakesFile: true, Destination: &o.StateRoot},
		&cli.StringFlag{Name: "tokens", Usage: "bearer token `FILE`: lines of \"sha256:<hex of the token> SUBJECT PLAN[,PLAN...]\" (required unless --oauth-issuer)", TakesFile: true, Destination: &o.Tokens},
		&cli.StringSliceFlag{Name: "allow-origin", Usage: "also accept requests whose Origin header is `ORIGIN` (scheme://host[:port], repeatable); other requests with an Origin are refused (403) unless it is the listen address", Destination: &o.AllowOrigin},
		&cli.BoolFlag{Name: "insecure-skip-verify", Usage: "serve the plans without verifying their signatures (unsafe; local experiments only)", Destination: &o.InsecureSkipVerify},
		&cli.DurationFlag{Name: "reload-interval", Value: time.Second, Usage: "look for added, changed or removed plans and a changed token or OAuth plans file every `DURATION`", Destination: &o.ReloadInterval},
		&cli.DurationFlag{Name: "call-timeout", Value: 60 * time.Second, Usage: "timeout of each forwarded call", Destination: &o.CallTimeout},
		&cli.DurationFlag{Name: "drain-timeout", Value: 30 * time.Second, Usage: "at shutdown, wait up to `DURATION` for calls in flight", Destination: &o.DrainTimeout},
		&cli.IntFlag{Name: "max-message-bytes", Value: proxy.DefaultMaxMessageBytes, Usage: "largest request body read; a larger one is refused (413)", Destination: &o.MaxMessageBytes},
		&cli.BoolFlag{Name: "audit-redact", Usage: "record the sha256 of the arguments instead of the arguments", Destination: &o.AuditRedact},
		&cli.BoolFlag{Name: "sync-each-call", Usage: "make each allowed call's audit record durable (fdatasync) before forwarding it (no count leases)", Destination: &o.SyncEachCall},
		&cli.StringFlag{Name: "log-format", Value: "text", Usage: "log `FORMAT` on stderr: text or json", Destination: &o.LogFormat},
	}, slices.Concat(o.stateKeyOptions.flags(), o.fileStateOptions.flags(), o.observeOptions.flags(), o.holdOptions.flags(), o.oauthOptions.flags(), o.telemetryOptions.flags(), o.trustOptions.flags())...)
}

func serveCommand() *cli.Command {
	o := &serveOptions{}
	return &cli.Command{
		Name:  "serve",
		Usage: "serve many plans to many authenticated agents over one HTTP endpoint",
		Description: `Serves every verified plan in --plans at http://ADDR/mcp/<plan name>
(streamable HTTP), each with the upstream its signed upstream block names,
its own counts, holds and audit log in a directory under --state kept for
its signed path and trust policy, never for its label. Every request
must carry a bearer token listed in --tokens (by its sha256), and reaches
only the plans that token is bound to; any other plan, served or not,
answers 404. The audit log and hold pull requests name the caller.

With --repo, --plans is the plans directory's path in that Git repository:
its plans on the default branch, with their bundles from the approvals
branch, are copied under --state and served from there (a plan deleted from
the branch stops being served).

Plans are loaded with the rules of planlock proxy: verified against the
trust policy, not expired, not older than the plan of the same name loaded
before. A plan file added, changed or removed is noticed within
--reload-interval; a plan that does not pass is logged and never replaces
the one serving. The token file is read again when it changes; a file that
does not parse keeps the tokens read before.

/healthz answers 200 while the process runs; /readyz answers 200 when
plans are served, their started upstreams are connected and their state
directories are writable. On SIGTERM the calls in flight finish (up to
--drain-timeout) and their outcomes are written before it exits.

Examples:
   planlock serve --plans plans --key planlock.pub --tokens tokens.txt --listen 127.0.0.1:8080`,
		Flags:  o.flags(),
		Action: action(o, runServe),
	}
}

// policy is the trust policy of the plans: from the trust flags, or none
// with the loud --insecure-skip-verify, never both.
func (o *serveOptions) policy(ctx context.Context) (*sign.Policy, error) {
	flag := o.trustGiven()
	if o.InsecureSkipVerify {
		if flag != "" {
			return nil, usageErrorf("--insecure-skip-verify does not verify the plans, so --%s would be ignored: give one or the other", flag)
		}
		return nil, nil
	}
	if flag == "" {
		return nil, usageErrorf("%s", noTrustPolicy)
	}
	return o.trustOptions.policy(ctx)
}

// serveEnv are the variables planlock serve reads.
func serveEnv() []envVar {
	vars := append([]envVar{stateEnv, tufCacheEnv, xdgConfigEnv}, gcEnv...)
	vars = append(append(vars, upstreamEnv...), pgEnv...) // --state postgres://...
	return append(vars, githubEnv...)                     // --repo credentials, hold pull requests
}

// newLogger is the structured logger of --log-format.
func newLogger(format string, w io.Writer) (*slog.Logger, error) {
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	}
	return nil, usageErrorf("--log-format %q: want text or json", format)
}

func runServe(ctx context.Context, o *serveOptions) error {
	log, err := newLogger(o.LogFormat, o.IO.err)
	if err != nil {
		return err
	}
	policy, err := o.policy(ctx)
	if err != nil {
		return err
	}
	if o.MaxMessageBytes < 1024 {
		return usageErrorf("--max-message-bytes must be at least 1024, got %d", o.MaxMessageBytes)
	}
	if o.ReloadInterval <= 0 {
		return usageErrorf("--reload-interval must be positive")
	}
	observe := o.observe(true) // proxy_observe.go
	if err := observe.Check(); err != nil {
		return runtimeErr(err)
	}
	holds, err := o.holdOptions.holds(ctx, &o.cmdline, &o.trustOptions, "serve", "") // proxy_holds.go
	if err != nil {
		return err
	}
	if err := holds.Check(); err != nil {
		return runtimeErr(err)
	}
	if o.Repo != "" {
		if o.PlansPath != "" {
			return usageErrorf("--plans-path does not go with --repo: --plans is then the directory's path in the repository")
		}
		if p := o.Plans; p == "" || strings.HasPrefix(p, "/") || path.Clean(p) != p || strings.HasPrefix(p, "../") || p == ".." || strings.Contains(p, "\\") {
			return usageErrorf("--plans %q: with --repo give the plans directory's path in the repository, e.g. plans", p)
		}
	}
	if o.PlansPath != "" && (path.Clean(o.PlansPath) != o.PlansPath || strings.HasPrefix(o.PlansPath, "/") || strings.HasPrefix(o.PlansPath, "..")) {
		return usageErrorf("--plans-path %q: give the directory's path in the repository, e.g. plans", o.PlansPath)
	}
	host, port, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return usageErrorf("--listen %q: %v", o.Listen, err)
	}
	if host == "" {
		host = "127.0.0.1" // loopback unless an address is given explicitly
	}
	front := proxy.HTTPOptions{}
	for _, a := range o.AllowOrigin.Value() {
		n, err := proxy.NormalizeOrigin(a)
		if err != nil {
			return usageErrorf("--allow-origin: %v", err)
		}
		front.AllowOrigins = append(front.AllowOrigins, n)
	}
	if o.Tokens == "" && o.Issuer == "" {
		return usageErrorf("give --tokens, --oauth-issuer or both: every request must be authenticated")
	}
	if f := o.oauthGiven(); f != "" && o.Issuer == "" {
		return usageErrorf("--%s needs --oauth-issuer", f)
	}
	var tokens *authn.Tokens
	var auths []authn.Authenticator
	if o.Tokens != "" {
		if tokens, err = authn.LoadTokens(o.Tokens); err != nil {
			return failf("--tokens: %v", err)
		}
		auths = append(auths, tokens)
	}
	state, pgURL := o.State, ""
	if planrun.IsPostgres(state) {
		state, pgURL = o.StateRoot, o.State // the plans' local files
	} else if o.StateRoot != "" {
		if state != "" {
			return usageErrorf("--state-root applies with --state postgres://... only: --state DIR is serve's state root")
		}
		state = o.StateRoot
	}
	if state == "" {
		if state, err = ledger.DefaultDir(); err != nil {
			return failf("state directory: %v", err)
		}
	}
	stateKey, err := o.key(state)
	if err != nil {
		return err
	}
	lo := ledger.Options{Redact: o.AuditRedact, SyncEachCall: o.SyncEachCall, StateKey: stateKey, AcceptUnkeyedState: o.AcceptUnkeyedState}
	if err := o.fileStateOptions.apply(&lo, pgURL != "", o.given); err != nil {
		return err
	}
	plansDir, repoDir := o.Plans, o.PlansPath
	var repoSync *planload.RepoDirSync
	if o.Repo != "" {
		if repoSync, err = serveRepo(ctx, o, state, log); err != nil {
			return err
		}
		plansDir, repoDir = repoSync.Local, o.Plans
	}
	// The listener comes first: the OAuth resource URL defaults to its address.
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return failf("listen: %v", err)
	}
	defer ln.Close()
	oauth, err := o.oauthOptions.build(ln.Addr())
	if err != nil {
		return err
	}
	var challenge func(*http.Request, error) string
	var routes map[string]http.Handler
	if oauth != nil {
		auths = append(auths, oauth.auth)
		challenge, routes = oauth.challenge, oauth.routes()
	}
	tel, err := o.telemetryOptions.start(ctx, func(s string) { log.Info(strings.TrimPrefix(s, "planlock: ")) }) // telemetry.go
	if err != nil {
		return err
	}
	defer tel.Close()
	lo.OnSync = tel.OnSync()
	holds.RepoURL = o.Repo
	holds.OnGitHub = func(ctx context.Context, gh *gitapprove.GitHub, base string) {
		_, _ = checkProtection(ctx, gh, base, func(s string) { log.Warn(strings.TrimPrefix(s, "planlock: ")) })
	}
	holds.LocalWhere = func(dir string) string { return " --state " + shellQuote(dir) }
	g, err := gateway.New(gateway.Config{
		PlansDir: plansDir, RepoDir: repoDir, Policy: policy, StateDir: state, State: pgURL,
		Holds: &holds, Observe: observe,
		Authenticators: auths, Challenge: challenge, Routes: routes,
		HTTP: front, ReloadInterval: o.ReloadInterval, DrainTimeout: o.DrainTimeout,
		Ledger:          lo,
		Observer:        tel.Observer,
		Metrics:         tel.gatewayMetrics(),
		UpstreamStderr:  func(plan string) *slog.Logger { return log.With("plan", plan, "from", "upstream stderr") },
		CallTimeout:     o.CallTimeout,
		MaxMessageBytes: o.MaxMessageBytes,
		Version:         shortVersion(),
		Log:             log,
	})
	if err != nil {
		return failf("%v", err)
	}
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if tokens != nil {
		go tokens.Run(tctx, o.ReloadInterval, func(s string) { log.Warn(s) })
		log.Info("static bearer tokens", "tokens", tokens.Len())
	}
	if oauth != nil {
		go oauth.plans.Run(tctx, o.ReloadInterval, oauth.auth, func(s string) { log.Warn(s) })
		log.Info(oauth.String())
	}
	if repoSync != nil {
		rdone := make(chan struct{})
		go func() { defer close(rdone); repoSync.Run(tctx, o.RepoInterval) }()
		defer func() { cancel(); <-rdone }()
	}
	log.Info(fmt.Sprintf("serving plans of %s at http://%s/mcp/<plan>", o.Plans, ln.Addr()))
	defer gcfloor.Start(proxyGCHeadroom)() // as the proxy: collections took a tenth of the CPU per call
	if err := g.Serve(ctx, ln); err != nil {
		return failf("%v", err)
	}
	return nil
}

// serveRepo makes the local copy of the plans repository's plans directory
// (in <state>/.repo/<hash of URL and directory>: no plan name starts with a
// dot, so no plan's state directory is there) and syncs it once: serve
// starts on the plans it could fetch, or on the copy a previous run left.
func serveRepo(ctx context.Context, o *serveOptions, state string, log *slog.Logger) (*planload.RepoDirSync, error) {
	sum := sha256.Sum256([]byte(o.Repo + "\x00" + o.Plans + "/"))
	dir := filepath.Join(state, ".repo", hex.EncodeToString(sum[:8]))
	creds := gitapprove.CredentialsFromEnv(os.Getenv)
	url := o.Repo
	rs := &planload.RepoDirSync{
		OpenRepo: func(ctx context.Context) (*gitapprove.Repo, error) {
			return gitapprove.OpenRefCache(ctx, url, filepath.Join(dir, "git"), gitapprove.Options{Credentials: creds})
		},
		Dir: o.Plans, Branch: o.RepoBranch, Approvals: o.holdOptions.ApprovalsBranch,
		Local: filepath.Join(dir, "plans"),
		Log:   func(s string) { log.Info(strings.TrimPrefix(s, "planlock: ")) },
	}
	if _, err := rs.Sync(ctx); err != nil {
		if _, serr := os.Stat(rs.Local); serr != nil {
			return nil, failf("plans repository %s: %v", redactURL(url), err)
		}
		log.Warn(fmt.Sprintf("plans repository %s: %v; starting on the copy fetched earlier (verified again now)", redactURL(url), err))
	}
	return rs, nil
}
