package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/planlock/planlock/internal/catalog"
	"github.com/planlock/planlock/proxy"
)

// upstreamOptions are the flags that name an upstream outside a plan.
type upstreamOptions struct {
	UpstreamURL      string
	Env              cli.StringSlice
	Timeout          time.Duration
	ProgressInterval time.Duration
}

func (o *upstreamOptions) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "upstream-url", Usage: "streamable HTTP `URL` of the upstream", Destination: &o.UpstreamURL},
		&cli.StringSliceFlag{Name: "env", Usage: "pass environment variable `NAME` to a stdio upstream (repeatable)", Destination: &o.Env},
		&cli.DurationFlag{Name: "timeout", Value: 2 * time.Minute, Usage: "give up on an upstream that has not listed its tools after this long (a first \"npx -y\" downloads the package)", Destination: &o.Timeout},
		// Hidden: how often "starting upstream… N s" is printed; tests shorten it.
		&cli.DurationFlag{Name: "progress-interval", Value: 3 * time.Second, Hidden: true, Destination: &o.ProgressInterval},
	}
}

// upstream reads the upstream from -- COMMAND (args) or --upstream-url.
func (o *upstreamOptions) upstream(args []string, stderr io.Writer) (proxy.UpstreamConfig, error) {
	var up proxy.UpstreamConfig
	url := o.UpstreamURL
	switch {
	case len(args) > 0 && url != "":
		return up, usageErrorf("give either -- COMMAND ARGS... or --upstream-url, not both")
	case len(args) == 0 && url == "":
		return up, usageErrorf("no upstream: give -- COMMAND ARGS... or --upstream-url URL")
	}
	up.URL, up.Command = url, args
	if len(args) > 0 {
		env, err := proxy.UpstreamEnv(o.Env.Value(), os.LookupEnv)
		if err != nil {
			return up, usageErrorf("%v", err)
		}
		up.Env = env
	}
	up.Stderr = stderr
	up.ClientName, up.ClientVersion = "planlock", shortVersion()
	up.InitTimeout = o.Timeout
	return up, nil
}

// fetchCatalog starts the upstream, lists its tools (and with all its
// resources and prompts) within --timeout, and stops it.
func (o *upstreamOptions) fetchCatalog(ctx context.Context, args []string, stderr io.Writer, all bool) (proxy.Catalog, proxy.UpstreamConfig, error) {
	up, err := o.upstream(args, stderr)
	if err != nil {
		return proxy.Catalog{}, up, err
	}
	timeout := o.Timeout
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stop := startProgress(tctx, stderr, upstreamName(up), o.ProgressInterval)
	var cat proxy.Catalog
	if all {
		cat, err = proxy.FetchCatalog(tctx, up)
	} else {
		cat.Tools, err = proxy.FetchTools(tctx, up)
	}
	stop()
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || tctx.Err() != nil && ctx.Err() == nil {
			return cat, up, failf("upstream %s did not list its tools within %s (--timeout %s): %v; give it longer with --timeout, e.g. --timeout 5m", upstreamName(up), timeout, timeout, err)
		}
		return cat, up, failf("%v", err)
	}
	return cat, up, nil
}

func upstreamName(up proxy.UpstreamConfig) string {
	if up.URL != "" {
		return up.URL
	}
	return strings.Join(up.Command, " ")
}

// startProgress prints "starting upstream… N s" to w every interval until
// stop is called, so that a slow start (npx downloading a package) is not
// silence. stop waits for the printer to end.
func startProgress(ctx context.Context, w io.Writer, name string, interval time.Duration) (stop func()) {
	if interval <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fmt.Fprintf(w, "planlock: starting upstream %s… %d s\n", name, int(time.Since(start).Round(time.Second)/time.Second))
			}
		}
	}()
	return func() { cancel(); <-done }
}

// toolsOptions are the flags of planlock tools.
type toolsOptions struct {
	cmdline
	upstreamOptions
	JSON bool
	Pins bool
}

func (o *toolsOptions) flags() []cli.Flag {
	return append(o.upstreamOptions.flags(),
		&cli.BoolFlag{Name: "json", Usage: "print the raw tools/list result (input of plan validate --tools)", Destination: &o.JSON},
		&cli.BoolFlag{Name: "pins", Usage: "print a tool_pin block (digest, description and definition) for every tool, to paste into a plan's steps", Destination: &o.Pins})
}

func toolsCommand() *cli.Command {
	o := &toolsOptions{}
	return &cli.Command{
		Name:      "tools",
		Usage:     "list an upstream MCP server's tools with their arguments",
		ArgsUsage: "[-- UPSTREAM_COMMAND ARGS...]",
		Description: `Starts the upstream (or connects to --upstream-url), lists its tools with
their arguments and stops it. While the upstream starts, stderr shows
"starting upstream… N s" every few seconds; it is given --timeout.

With --pins it prints, for every tool, the tool_pin block that approves its
definition as listed now (docs/plan-language.md, Tool definition pins).

Examples:
   planlock tools -- npx -y @modelcontextprotocol/server-filesystem ~/docs
   planlock tools --json --upstream-url http://127.0.0.1:3001/mcp > tools.json
   planlock tools --pins -- npx -y @modelcontextprotocol/server-filesystem ~/docs`,
		Flags:  o.flags(),
		Action: action(o, runTools),
	}
}

func runTools(ctx context.Context, o *toolsOptions) error {
	cat, _, err := o.fetchCatalog(ctx, o.Args, o.IO.err, false)
	if err != nil {
		return err
	}
	if o.JSON && o.Pins {
		return usageErrorf("give --json or --pins, not both")
	}
	if o.JSON {
		return writeJSONEscaped(o.IO.out, toolsJSON{Tools: cat.Tools})
	}
	tools, err := catalog.Decode(cat.Tools)
	if err != nil {
		return failf("%v", err)
	}
	if o.Pins {
		fmt.Fprint(o.IO.out, catalog.Pins(tools))
		return nil
	}
	fmt.Fprint(o.IO.out, catalog.List(tools))
	return nil
}

// planInitOptions are the flags of planlock plan init.
type planInitOptions struct {
	cmdline
	upstreamOptions
	Output  string
	Expires string
}

func (o *planInitOptions) flags() []cli.Flag {
	return append(o.upstreamOptions.flags(),
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write to `FILE` instead of stdout (refuses to overwrite; makes missing directories)", Destination: &o.Output},
		&cli.StringFlag{Name: "expires", Usage: "let the plan expire after `WHEN`: a duration from now (7d, 36h) or an RFC 3339 time (default: never)", Destination: &o.Expires})
}

func planInitCommand() *cli.Command {
	o := &planInitOptions{}
	return &cli.Command{
		Name:      "init",
		Usage:     "write a skeleton plan from an upstream's tools",
		ArgsUsage: "NAME -- UPSTREAM_COMMAND ARGS...",
		Description: `Writes a plan named NAME with every tool of the upstream as a commented-out
step with suggested constraints, and the upstream as the plan's upstream
block. The plan has no expires unless --expires asks for one (a duration
from now such as 7d or 12h, or an RFC 3339 time); stderr says which.

Examples:
   planlock plan init read-docs -o plans/read-docs.hcl -- npx -y @modelcontextprotocol/server-filesystem ~/docs
   planlock plan init refund --expires 7d --upstream-url http://127.0.0.1:3001/mcp
   planlock plan init triage --expires 2027-06-30T23:59:59Z -- node server.js > triage.hcl`,
		Flags:  o.flags(),
		Action: action(o, runPlanInit),
	}
}

func runPlanInit(ctx context.Context, o *planInitOptions) error {
	if len(o.Args) < 1 {
		return usageErrorf("plan init needs a plan NAME")
	}
	name := o.Args[0]
	now := time.Now()
	var expires time.Time
	if e := o.Expires; e != "" {
		var err error
		if expires, err = parseExpires(e, now); err != nil {
			return usageErrorf("plan init: --expires: %v", err)
		}
	}
	// The upstream command follows the name (and its "--").
	rest := o.Args[1:]
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	}
	cat, upc, err := o.fetchCatalog(ctx, rest, o.IO.err, true)
	if err != nil {
		return err
	}
	decoded, err := catalog.Decode(cat.Tools)
	if err != nil {
		return failf("%v", err)
	}
	extras := catalog.DecodeExtras(cat.Resources, cat.Templates, cat.Prompts)
	src := catalog.SkeletonWith(name, decoded, extras, upc.Command, upc.URL, expires)
	if expires.IsZero() {
		o.errw("planlock: the plan does not expire; give --expires 7d (or an RFC 3339 time) to limit how long it can be used")
	} else {
		fmt.Fprintf(o.IO.err, "planlock: the plan expires at %s (--expires %s)\n", expires.UTC().Truncate(time.Second).Format(time.RFC3339), o.Expires)
	}
	if out := o.Output; out != "" {
		if err := os.MkdirAll(filepath.Dir(filepath.Clean(out)), 0o755); err != nil {
			return failf("plan init: %v", err)
		}
		f, err := os.OpenFile(filepath.Clean(out), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return failf("%v", err)
		}
		if _, err := f.Write(src); err != nil {
			f.Close()
			return failf("write %s: %v", out, err)
		}
		return f.Close()
	}
	_, err = o.IO.out.Write(src)
	return err
}

// parseExpires reads --expires: a duration from now in days (7d), or any Go
// duration (36h, 90m), or an RFC 3339 time, which must be in the future.
func parseExpires(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		if !t.After(now) {
			return time.Time{}, fmt.Errorf("%s is in the past", s)
		}
		return t, nil
	}
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 1 {
			return time.Time{}, fmt.Errorf("%q: give a number of days such as 7d, a duration such as 36h, or an RFC 3339 time", s)
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil || d <= 0 {
			return time.Time{}, fmt.Errorf("%q: give a number of days such as 7d, a duration such as 36h, or an RFC 3339 time", s)
		}
	}
	return now.Add(d).Truncate(time.Second), nil
}
