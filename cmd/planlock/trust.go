package main

import (
	"context"

	"github.com/planlock/planlock/internal/boundedio"
	"github.com/planlock/planlock/sign"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/urfave/cli/v2"
)

// trustOptions are the operator's trust policy flags (cosign's names),
// shared by every command that verifies approvals; embedded where used.
type trustOptions struct {
	CertificateIdentity         string
	CertificateIdentityRegexp   string
	CertificateOIDCIssuer       string
	CertificateOIDCIssuerRegexp string
	GitHubWorkflowRepository    string
	GitHubWorkflowRef           string
	GitHubWorkflowTrigger       string
	GitHubWorkflowSHA           string
	GitHubWorkflowName          string
	Key                         string
	TrustedRoot                 string
	TUFCache                    string
}

const trustCategory = "Trust policy"

// flags are the trust flags: the one list of them.
func (o *trustOptions) flags() []cli.Flag {
	s := func(name, usage string, dst *string) *cli.StringFlag {
		return &cli.StringFlag{Name: name, Usage: usage, Category: trustCategory, Destination: dst}
	}
	file := func(name, usage string, dst *string) *cli.StringFlag {
		f := s(name, usage, dst)
		f.TakesFile = true
		return f
	}
	return []cli.Flag{
		s("certificate-identity", "trust signatures whose certificate identity (SAN) is exactly `ID`", &o.CertificateIdentity),
		s("certificate-identity-regexp", "trust certificate identities matching `RE2` (the whole SAN must match)", &o.CertificateIdentityRegexp),
		s("certificate-oidc-issuer", "the certificate's OIDC issuer must be exactly `URL`", &o.CertificateOIDCIssuer),
		s("certificate-oidc-issuer-regexp", "the certificate's OIDC issuer must match `RE2` (whole value)", &o.CertificateOIDCIssuerRegexp),
		s("certificate-github-workflow-repository", "the certificate's GitHub workflow repository must be `OWNER/REPO`", &o.GitHubWorkflowRepository),
		s("certificate-github-workflow-ref", "the certificate's GitHub workflow ref must be `REF` (e.g. refs/heads/main)", &o.GitHubWorkflowRef),
		s("certificate-github-workflow-trigger", "the certificate's GitHub workflow trigger must be `EVENT`, or one of a comma-separated list (recommended: push,schedule: the signing workflow's own events)", &o.GitHubWorkflowTrigger),
		s("certificate-github-workflow-sha", "the certificate's GitHub workflow commit must be `SHA`", &o.GitHubWorkflowSHA),
		s("certificate-github-workflow-name", "the certificate's GitHub workflow name must be `NAME`", &o.GitHubWorkflowName),
		file("key", "trust signatures made with this PEM public `KEY` file instead of certificates", &o.Key),
		file("trusted-root", "sigstore trusted_root.json `FILE` (offline or private sigstore; default: public-good root via TUF); with --key it checks the bundle's log entries and timestamps", &o.TrustedRoot),
		file("tuf-cache", "`DIR` caching the public-good TUF metadata (default: user cache dir)", &o.TUFCache),
	}
}

// trustFlagNames are the names of the trust flags, in order.
func trustFlagNames() []string {
	var names []string
	for _, f := range (&trustOptions{}).flags() {
		names = append(names, f.Names()[0])
	}
	return names
}

// policy builds the trust policy from the flags. Problems with the flags
// themselves are usage errors; unreadable files are failures.
func (o *trustOptions) policy(ctx context.Context) (*sign.Policy, error) {
	opts := sign.PolicyOptions{
		CertificateIdentity:         o.CertificateIdentity,
		CertificateIdentityRegexp:   o.CertificateIdentityRegexp,
		CertificateOIDCIssuer:       o.CertificateOIDCIssuer,
		CertificateOIDCIssuerRegexp: o.CertificateOIDCIssuerRegexp,
		GitHubWorkflowRepository:    o.GitHubWorkflowRepository,
		GitHubWorkflowRef:           o.GitHubWorkflowRef,
		GitHubWorkflowTrigger:       o.GitHubWorkflowTrigger,
		GitHubWorkflowSHA:           o.GitHubWorkflowSHA,
		GitHubWorkflowName:          o.GitHubWorkflowName,
	}
	keyless := opts.CertificateIdentity != "" || opts.CertificateIdentityRegexp != "" ||
		opts.CertificateOIDCIssuer != "" || opts.CertificateOIDCIssuerRegexp != ""
	if key := o.Key; key != "" {
		if keyless {
			return nil, usageErrorf("give either --key or --certificate-* flags, not both")
		}
		data, err := boundedio.ReadFile(key, boundedio.MaxKeyBytes)
		if err != nil {
			return nil, failf("%v", err)
		}
		pub, err := sign.ParsePublicKey(data)
		if err != nil {
			return nil, failf("--key %s: %v", key, err)
		}
		opts.PublicKey = pub
		// A key bundle's log entries and timestamps are checked against
		// the trusted root too, fetched only when a bundle carries them.
		if err := o.trustedRoot(ctx, &opts); err != nil {
			return nil, err
		}
	} else if keyless {
		if opts.CertificateIdentity == "" && opts.CertificateIdentityRegexp == "" {
			return nil, usageErrorf("--certificate-identity or --certificate-identity-regexp is required")
		}
		if opts.CertificateOIDCIssuer == "" && opts.CertificateOIDCIssuerRegexp == "" {
			return nil, usageErrorf("--certificate-oidc-issuer or --certificate-oidc-issuer-regexp is required")
		}
		if err := o.trustedRoot(ctx, &opts); err != nil {
			return nil, err
		}
	} else {
		return nil, usageErrorf("no trust policy: give --key PUBLIC_KEY, or --certificate-identity (or -regexp) with --certificate-oidc-issuer")
	}
	p, err := sign.NewPolicy(opts)
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	return p, nil
}

// trustedRoot sets the sigstore trusted root bundles are checked against:
// --trusted-root, else the public-good root through TUF, fetched on the
// first bundle that passes the local checks (a missing bundle is reported
// before any fetch).
func (o *trustOptions) trustedRoot(ctx context.Context, opts *sign.PolicyOptions) error {
	if file := o.TrustedRoot; file != "" {
		tm, err := sign.LoadTrustedRoot(ctx, file, "")
		if err != nil {
			return failf("%v", err)
		}
		opts.TrustedMaterial = tm
		return nil
	}
	cache := o.TUFCache
	opts.LoadTrustedMaterial = func(ctx context.Context) (root.TrustedMaterial, error) {
		return sign.LoadTrustedRoot(ctx, "", cache)
	}
	return nil
}
