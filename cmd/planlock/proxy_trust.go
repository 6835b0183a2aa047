package main

import (
	"context"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/planrun"
	"github.com/planlock/planlock/proxy/planload"
	"github.com/planlock/planlock/sign"
)

// planOptions are the flags naming a plan and how it is trusted, shared
// by proxy and mcp-config (each declares them in its own words).
type planOptions struct {
	trustOptions
	Plan               string
	InsecureSkipVerify bool
	Bundle             string
	Path               string
}

// trustGiven names the first trust flag set, "" when none is.
func (cl *cmdline) trustGiven() string {
	for _, n := range trustFlagNames() {
		if cl.given(n) {
			return n
		}
	}
	return ""
}

const noTrustPolicy = "no trust policy for the plan: give --key PUBLIC_KEY, or --certificate-identity (or -regexp) with --certificate-oidc-issuer, to verify its signature; or --insecure-skip-verify to run it unverified (local experiments only)"

// source is the plan and how it is trusted, from the proxy's flags:
// either a trust policy or the loud --insecure-skip-verify, never both.
func (o *planOptions) source(ctx context.Context, cl *cmdline) (planload.Source, error) {
	src := planload.Source{File: o.Plan, Bundle: o.Bundle, Path: o.Path}
	flag := cl.trustGiven()
	if o.InsecureSkipVerify {
		if flag == "" && src.Bundle != "" {
			flag = "bundle"
		}
		if flag == "" && src.Path != "" {
			flag = "path"
		}
		if flag != "" {
			return src, usageErrorf("--insecure-skip-verify does not verify the plan, so --%s would be ignored: give one or the other", flag)
		}
		return src, nil
	}
	if flag == "" {
		return src, usageErrorf("%s", noTrustPolicy)
	}
	if src.Path == "" {
		p, err := sign.RepoPath(src.File)
		if err != nil {
			return src, usageErrorf("--plan: %v with --path", err)
		}
		src.Path = p
	}
	policy, err := o.policy(ctx)
	if err != nil {
		return src, err
	}
	src.Policy = policy
	return src, nil
}

// sameUpstream reports whether two upstream blocks name the same upstream.
func sameUpstream(a, b *hclplan.Upstream) bool { return planrun.SameUpstream(a, b) }

// trustArgs are the proxy flags that make a pasted MCP configuration verify
// the plan as given here: the trust flags (files made absolute, since
// clients start servers from another directory), --bundle and --path.
func (o *planOptions) trustArgs(cl *cmdline, planFile string) ([]string, error) {
	var args []string
	for _, f := range o.trustOptions.flags() {
		n := f.Names()[0]
		if !cl.typed(n) { // the proxy reads the same config file
			continue
		}
		v := f.(*cli.StringFlag).Destination
		if takesFile(f) {
			abs, err := filepath.Abs(*v)
			if err != nil {
				return nil, failf("--%s: %v", n, err)
			}
			args = append(args, "--"+n, abs)
			continue
		}
		args = append(args, "--"+n, *v)
	}
	if b := o.Bundle; b != "" {
		abs, err := filepath.Abs(b)
		if err != nil {
			return nil, failf("--bundle: %v", err)
		}
		args = append(args, "--bundle", abs)
	}
	// The path as signed, from where the plan is now: the proxy sees the
	// absolute file name, which outside a Git checkout names no repository.
	path := o.Path
	if path == "" {
		p, err := sign.RepoPath(planFile)
		if err != nil {
			return nil, usageErrorf("--plan: %v with --path", err)
		}
		path = p
	}
	return append(args, "--path", path), nil
}
