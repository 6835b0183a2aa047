package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/proxy/planload"
	"github.com/planlock/planlock/sign"
	"github.com/urfave/cli/v2"
)

// verifyOptions are the flags of planlock verify.
type verifyOptions struct {
	cmdline
	trustOptions
	Bundle string
	Path   string
	Kind   string
	JSON   bool
}

func (o *verifyOptions) flags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "bundle", Usage: "read the bundle from `FILE` (one PATH only; default PATH.sigstore.json)", TakesFile: true, Destination: &o.Bundle},
		&cli.StringFlag{Name: "path", Usage: "the file's `PATH` in the repository (one PATH only; default: relative to the Git checkout)", Destination: &o.Path},
		&cli.StringFlag{Name: "kind", Value: string(sign.KindPlan), Usage: "expected approval `KIND`: plan or hold", Destination: &o.Kind},
		&cli.BoolFlag{Name: "json", Usage: "print the results as JSON on standard output", Destination: &o.JSON},
	}, o.trustOptions.flags()...)
}

func verifyCommand() *cli.Command {
	o := &verifyOptions{}
	return &cli.Command{
		Name:      "verify",
		Usage:     "check that files carry an approval signature the trust policy accepts",
		ArgsUsage: "PATH ...",
		Description: `Verifies each file's sigstore bundle (PATH.sigstore.json, or --bundle) against
the trust policy given by the flags, never by the file: a keyless signature
from a certificate identity (--certificate-identity or an anchored
--certificate-identity-regexp, with --certificate-oidc-issuer), checked
against the public-good sigstore root (or --trusted-root), or a signature made
with --key. The bundle must sign these exact bytes, name this file's path in
the repository, and be of the expected --kind. A plan must also not have
expired: the proxy refuses it then, and so does verify.

Examples:
   planlock verify --key ~/.config/planlock/planlock.pub plans/refund.hcl
   planlock verify plans/refund.hcl \
     --certificate-identity https://github.com/acme/plans/.github/workflows/sign.yml@refs/heads/main \
     --certificate-oidc-issuer https://token.actions.githubusercontent.com
   planlock verify --json --trusted-root trusted_root.json \
     --certificate-identity-regexp 'https://github\.com/acme/plans/\.github/workflows/sign\.yml@refs/heads/.+' \
     --certificate-oidc-issuer https://token.actions.githubusercontent.com \
     --certificate-github-workflow-ref refs/heads/main plans/*.hcl

Exit status: 0 when every file verifies, 1 when any does not (one line on
standard error per file saying why), 2 on usage errors.`,
		Flags:  o.flags(),
		Action: action(o, runVerify),
	}
}

func runVerify(ctx context.Context, o *verifyOptions) error {
	if len(o.Args) == 0 {
		return usageErrorf("verify: give at least one file")
	}
	if len(o.Args) > 1 && (o.given("bundle") || o.given("path")) {
		return usageErrorf("verify: --bundle and --path take one file only")
	}
	kind, err := sign.ParseKind(o.Kind)
	if err != nil {
		return usageErrorf("verify: --kind: %v", err)
	}
	policy, err := o.policy(ctx)
	if err != nil {
		return err
	}
	var results []verifyResult
	failed := 0
	for _, file := range o.Args {
		r := verifyFile(ctx, policy, sign.FileInput{File: file, Bundle: o.Bundle, Path: o.Path, Kind: kind})
		if !r.Verified {
			failed++
			if !o.JSON {
				fmt.Fprintf(o.IO.err, "planlock: %s\n", r.Error)
			}
		} else if !o.JSON {
			fmt.Fprintf(o.IO.out, "%s: verified %s signed by %s at %s%s%s\n", r.File, r.Kind, r.Signer.Identity,
				r.SignedAt.Format(time.RFC3339), timeNote(r.SignedAtSource), approvalNote(r.Predicate))
		}
		results = append(results, r)
	}
	if o.JSON {
		if err := writeJSONEscaped(o.IO.out, results); err != nil {
			return failf("verify: %v", err)
		}
	}
	if failed > 0 {
		if o.JSON || len(o.Args) == 1 {
			return silentExit(exitFailure)
		}
		return failf("%d of %s did not verify", failed, plural(len(o.Args), "file", "files"))
	}
	return nil
}

// timeNote says where the signing time comes from when only the signer
// vouches for it: it then cannot order approvals against a signer who lies.
func timeNote(source string) string {
	if source == "predicate" {
		return " (claimed by the signer)"
	}
	return ""
}

func approvalNote(p *sign.Predicate) string {
	s := ""
	if p.PullRequest != 0 {
		s += fmt.Sprintf(", pull request #%d", p.PullRequest)
	}
	if p.Commit != "" {
		s += ", commit " + shortSHA(p.Commit)
	}
	if len(p.Approvers) > 0 {
		s += ", approved by " + strings.Join(p.Approvers, ", ")
	}
	if s != "" {
		s = " (" + s[2:] + ")"
	}
	return s
}

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// verifyFile verifies one file (in.Path "": relative to its Git checkout).
func verifyFile(ctx context.Context, policy *sign.Policy, in sign.FileInput) verifyResult {
	r := verifyResult{File: in.File, Path: in.Path}
	if r.Path == "" {
		r.Path, _ = sign.RepoPath(in.File)
	}
	src, a, err := policy.VerifyFile(ctx, in)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	// An expired plan, which the proxy refuses however well signed, does
	// not verify either: the proxy's check on the same bytes. (A file that
	// does not parse is plan validate's to judge, as for sign.)
	if a.Kind == sign.KindPlan {
		if p, _ := hclplan.Parse(in.File, src); p != nil {
			if err := planload.CheckExpiry(p, time.Now()); err != nil {
				r.Error = in.File + ": " + err.Error()
				return r
			}
		}
	}
	r.Verified = true
	r.Kind = a.Kind
	r.Digest = "sha256:" + a.Digest
	r.Signer = &a.Signer
	r.SignedAt = &a.SignedAt
	r.SignedAtSource = a.SignedAtSource
	r.Predicate = &a.Predicate
	return r
}
