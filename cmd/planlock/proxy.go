package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/proxy"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/sign"
)

func proxyCommand() *cli.Command {
	return &cli.Command{
		Name:      "proxy",
		Usage:     "run the MCP gate between an agent and an upstream MCP server",
		ArgsUsage: "[-- UPSTREAM_COMMAND ARGS...]",
		Description: `Serves the agent over stdio (default) or streamable HTTP (--listen) and
forwards to the upstream given after -- (stdio), by --upstream-url, or by the
plan's upstream block. Only the plan's tools are shown; every call is checked
against the plan and counted durably in --state before it is forwarded.`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "plan", Usage: "plan `FILE` (HCL), verified against the trust policy", Required: true},
			&cli.StringFlag{Name: "bundle", Usage: "the plan's sigstore bundle `FILE` (default PLAN.sigstore.json)", TakesFile: true},
			&cli.StringFlag{Name: "path", Usage: "the plan's `PATH` in the repository, as signed (default: relative to the Git checkout)"},
			&cli.BoolFlag{Name: "insecure-skip-verify", Usage: "run the plan without verifying its signature (unsafe; warns on every start)"},
			&cli.StringFlag{Name: "listen", Usage: "serve streamable HTTP on `ADDR` (e.g. 127.0.0.1:3001, path /mcp) instead of stdio; a bare :PORT means loopback"},
			&cli.StringFlag{Name: "upstream-url", Usage: "streamable HTTP `URL` of the upstream"},
			&cli.StringSliceFlag{Name: "env", Usage: "pass environment variable `NAME` to a stdio upstream (repeatable)"},
			&cli.StringFlag{Name: "state", Usage: "state `DIR` (default $XDG_STATE_HOME/planlock)"},
			&cli.StringFlag{Name: "audit", Usage: "audit log `FILE` (default <state>/audit.jsonl)"},
			&cli.BoolFlag{Name: "audit-redact", Usage: "record the sha256 of the arguments instead of the arguments"},
			&cli.DurationFlag{Name: "call-timeout", Value: 60 * time.Second, Usage: "timeout of each forwarded call"},
			&cli.IntFlag{Name: "max-message-bytes", Value: proxy.DefaultMaxMessageBytes, Usage: "largest client message (stdio line or HTTP body) read; a larger one gets a JSON-RPC error"},
		}, trustFlags()...),
		Action: runProxy,
	}
}

// upstreamFrom decides the upstream from the plan and the command line:
// exactly one source may give it.
func upstreamFrom(plan *hclplan.Plan, args []string, url string, envNames []string) (proxy.UpstreamConfig, error) {
	var up proxy.UpstreamConfig
	var planCmd []string
	var planURL string
	var names []string
	if plan.Upstream != nil {
		planCmd, planURL, names = plan.Upstream.Command, plan.Upstream.URL, plan.Upstream.Env
	}
	sources := 0
	for _, given := range []bool{len(args) > 0, url != "", len(planCmd) > 0, planURL != ""} {
		if given {
			sources++
		}
	}
	switch {
	case sources == 0:
		return up, usageErrorf("no upstream: give -- COMMAND ARGS..., --upstream-url URL, or an upstream block in the plan")
	case sources > 1:
		return up, usageErrorf("the upstream is given more than once (plan upstream block, -- COMMAND, --upstream-url): give exactly one")
	}
	up.URL = url + planURL
	if len(args) > 0 {
		up.Command = args
	} else {
		up.Command = planCmd
	}
	if len(up.Command) > 0 {
		env, err := proxy.UpstreamEnv(append(append([]string{}, names...), envNames...), os.LookupEnv)
		if err != nil {
			return up, usageErrorf("%v", err)
		}
		up.Env = env
	} else if len(envNames) > 0 {
		return up, usageErrorf("--env applies to a stdio upstream only")
	}
	return up, nil
}

// loadPlan reads the plan file once; the signature check and the parser see
// the same bytes. It returns the signing time (zero when not verified).
func loadPlan(c *cli.Context, errw func(string)) (*hclplan.Plan, time.Time, error) {
	path := c.String("plan")
	var src []byte
	var signedAt time.Time
	if c.Bool("insecure-skip-verify") {
		for _, f := range trustFlags() {
			if c.IsSet(f.Names()[0]) {
				return nil, signedAt, usageErrorf("--insecure-skip-verify and --%s contradict each other: verify, or do not", f.Names()[0])
			}
		}
		errw("planlock: WARNING: --insecure-skip-verify: running plan " + path + " WITHOUT verifying its signature; anyone who can edit this file controls what the agent may do")
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, signedAt, failf("read plan: %v", err)
		}
		src = b
	} else {
		policy, err := policyFromFlags(c)
		if err != nil {
			return nil, signedAt, err
		}
		b, a, err := policy.VerifyFile(c.Context, sign.FileInput{File: path, Bundle: c.String("bundle"), Path: c.String("path"), Kind: sign.KindPlan})
		if err != nil {
			return nil, signedAt, failf("plan %s refused: %v", path, err)
		}
		src, signedAt = b, a.SignedAt
		errw(fmt.Sprintf("planlock: plan %s verified: signed by %s at %s", path, a.Signer.Identity, a.SignedAt.UTC().Format(time.RFC3339)))
	}
	plan, diags := hclplan.Parse(path, src)
	if diags.HasErrors() {
		return nil, signedAt, failf("plan %s is not valid: %s", path, oneLineDiags(diags.Error()))
	}
	return plan, signedAt, nil
}

func oneLineDiags(s string) string { return strings.ReplaceAll(s, "\n", "; ") }

func runProxy(c *cli.Context) error {
	errw := func(s string) { fmt.Fprintln(c.App.ErrWriter, s) }
	if c.Int("max-message-bytes") < 1024 {
		return usageErrorf("--max-message-bytes must be at least 1024, got %d", c.Int("max-message-bytes"))
	}
	plan, signedAt, err := loadPlan(c, errw)
	if err != nil {
		return err
	}
	up, err := upstreamFrom(plan, c.Args().Slice(), c.String("upstream-url"), c.StringSlice("env"))
	if err != nil {
		return err
	}
	up.Stderr = c.App.ErrWriter
	if plan.Expired(time.Now()) {
		return failf("plan %q expired at %s; refusing to load it", plan.Name, plan.Expires.UTC().Format(time.RFC3339))
	}
	var ln net.Listener
	token := os.Getenv("PLANLOCK_LISTEN_TOKEN")
	if addr := c.String("listen"); addr != "" {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return usageErrorf("--listen %q: %v", addr, err)
		}
		if host == "" {
			host = "127.0.0.1" // loopback unless an address is given explicitly
		}
		if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && host != "localhost" && token == "" {
			errw("planlock: WARNING: listening on " + host + " without PLANLOCK_LISTEN_TOKEN: anyone who can reach it can call the planned tools")
		}
		ln, err = net.Listen("tcp", net.JoinHostPort(host, port))
		if err != nil {
			return failf("listen: %v", err)
		}
		defer ln.Close()
	}
	ctx := c.Context
	l, err := ledger.Open(ctx, ledger.Options{Dir: c.String("state"), AuditPath: c.String("audit"), Redact: c.Bool("audit-redact")})
	if err != nil {
		return failf("%v", err)
	}
	defer l.Close()
	if !signedAt.IsZero() {
		// No downgrade: refuse a plan signed before the newest one of the
		// same name this state has run.
		if err := l.LoadPlan(ctx, ledger.PlanLoad{Name: plan.Name, Digest: plan.Digest, SignedAt: signedAt}); err != nil {
			return failf("%v", err)
		}
	}
	p, err := proxy.New(proxy.Config{Plan: plan, State: l, Upstream: up, CallTimeout: c.Duration("call-timeout"),
		MaxMessageBytes: c.Int("max-message-bytes"), Log: c.App.ErrWriter, Version: version})
	if err != nil {
		return failf("%v", err)
	}
	if ln != nil {
		errw(fmt.Sprintf("planlock: serving plan %q on http://%s/mcp", plan.Name, ln.Addr()))
		err = p.ServeHTTP(ctx, ln, token)
	} else {
		err = p.ServeStdio(ctx, c.App.Reader, c.App.Writer)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return failf("%v", err)
	}
	return nil
}
