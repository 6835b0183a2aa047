package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/planlock/planlock/sign"
	"github.com/urfave/cli/v2"
)

func verifyCommand() *cli.Command {
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
the repository, and be of the expected --kind.

Examples:
   planlock verify --key planlock.pub plans/refund.hcl
   planlock verify plans/refund.hcl \
     --certificate-identity https://github.com/acme/plans/.github/workflows/sign.yml@refs/heads/main \
     --certificate-oidc-issuer https://token.actions.githubusercontent.com
   planlock verify --json --trusted-root trusted_root.json \
     --certificate-identity-regexp 'https://github\.com/acme/plans/\.github/workflows/sign\.yml@refs/heads/.+' \
     --certificate-oidc-issuer https://token.actions.githubusercontent.com \
     --certificate-github-workflow-ref refs/heads/main plans/*.hcl

Exit status: 0 when every file verifies, 1 when any does not (one line on
standard error per file saying why), 2 on usage errors.`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "bundle", Usage: "read the bundle from `FILE` (one PATH only; default PATH.sigstore.json)", TakesFile: true},
			&cli.StringFlag{Name: "path", Usage: "the file's `PATH` in the repository (one PATH only; default: relative to the Git checkout)"},
			&cli.StringFlag{Name: "kind", Value: string(sign.KindPlan), Usage: "expected approval `KIND`: plan or hold"},
			&cli.BoolFlag{Name: "json", Usage: "print the results as JSON on standard output"},
		}, trustFlags()...),
		Action: runVerify,
	}
}

// verifyResult is one file's result in --json output.
type verifyResult struct {
	File           string          `json:"file"`
	Path           string          `json:"path"`
	Verified       bool            `json:"verified"`
	Error          string          `json:"error,omitempty"`
	Kind           sign.Kind       `json:"kind,omitempty"`
	Digest         string          `json:"digest,omitempty"`
	Signer         *sign.Signer    `json:"signer,omitempty"`
	SignedAt       *time.Time      `json:"signedAt,omitempty"`
	SignedAtSource string          `json:"signedAtSource,omitempty"`
	Predicate      *sign.Predicate `json:"predicate,omitempty"`
}

func runVerify(c *cli.Context) error {
	if c.NArg() == 0 {
		return usageErrorf("verify: give at least one file")
	}
	if c.NArg() > 1 && (c.IsSet("bundle") || c.IsSet("path")) {
		return usageErrorf("verify: --bundle and --path take one file only")
	}
	kind, err := sign.ParseKind(c.String("kind"))
	if err != nil {
		return usageErrorf("verify: --kind: %v", err)
	}
	policy, err := policyFromFlags(c)
	if err != nil {
		return err
	}
	var results []verifyResult
	failed := 0
	for _, file := range c.Args().Slice() {
		r := verifyFile(c, policy, file, kind)
		if !r.Verified {
			failed++
			if !c.Bool("json") {
				fmt.Fprintf(c.App.ErrWriter, "planlock: %s\n", r.Error)
			}
		} else if !c.Bool("json") {
			fmt.Fprintf(c.App.Writer, "%s: verified %s signed by %s at %s%s%s\n", r.File, r.Kind, r.Signer.Identity,
				r.SignedAt.Format(time.RFC3339), timeNote(r.SignedAtSource), approvalNote(r.Predicate))
		}
		results = append(results, r)
	}
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		if err := enc.Encode(results); err != nil {
			return failf("verify: %v", err)
		}
	}
	if failed > 0 {
		if c.Bool("json") || c.NArg() == 1 {
			return silentExit(exitFailure)
		}
		return failf("%d of %s did not verify", failed, plural(c.NArg(), "file", "files"))
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

func verifyFile(c *cli.Context, policy *sign.Policy, file string, kind sign.Kind) verifyResult {
	r := verifyResult{File: file, Path: c.String("path")}
	if r.Path == "" {
		r.Path, _ = sign.RepoPath(file)
	}
	_, a, err := policy.VerifyFile(c.Context, sign.FileInput{File: file, Bundle: c.String("bundle"), Path: c.String("path"), Kind: kind})
	if err != nil {
		r.Error = err.Error()
		return r
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
