package main

import (
	"context"

	"github.com/planlock/planlock/internal/boundedio"
	"github.com/planlock/planlock/sign"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/urfave/cli/v2"
)

// trustFlags are the operator's trust policy flags (cosign's names), shared
// by every command that verifies approvals.
func trustFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "certificate-identity", Usage: "trust signatures whose certificate identity (SAN) is exactly `ID`", Category: "Trust policy"},
		&cli.StringFlag{Name: "certificate-identity-regexp", Usage: "trust certificate identities matching `RE2` (the whole SAN must match)", Category: "Trust policy"},
		&cli.StringFlag{Name: "certificate-oidc-issuer", Usage: "the certificate's OIDC issuer must be exactly `URL`", Category: "Trust policy"},
		&cli.StringFlag{Name: "certificate-oidc-issuer-regexp", Usage: "the certificate's OIDC issuer must match `RE2` (whole value)", Category: "Trust policy"},
		&cli.StringFlag{Name: "certificate-github-workflow-repository", Usage: "the certificate's GitHub workflow repository must be `OWNER/REPO`", Category: "Trust policy"},
		&cli.StringFlag{Name: "certificate-github-workflow-ref", Usage: "the certificate's GitHub workflow ref must be `REF` (e.g. refs/heads/main)", Category: "Trust policy"},
		&cli.StringFlag{Name: "certificate-github-workflow-trigger", Usage: "the certificate's GitHub workflow trigger must be `EVENT`, or one of a comma-separated list (recommended: push,schedule: the signing workflow's own events)", Category: "Trust policy"},
		&cli.StringFlag{Name: "certificate-github-workflow-sha", Usage: "the certificate's GitHub workflow commit must be `SHA`", Category: "Trust policy"},
		&cli.StringFlag{Name: "certificate-github-workflow-name", Usage: "the certificate's GitHub workflow name must be `NAME`", Category: "Trust policy"},
		&cli.StringFlag{Name: "key", Usage: "trust signatures made with this PEM public `KEY` file instead of certificates", TakesFile: true, Category: "Trust policy"},
		&cli.StringFlag{Name: "trusted-root", Usage: "sigstore trusted_root.json `FILE` (offline or private sigstore; default: public-good root via TUF); with --key it checks the bundle's log entries and timestamps", TakesFile: true, Category: "Trust policy"},
		&cli.StringFlag{Name: "tuf-cache", Usage: "`DIR` caching the public-good TUF metadata (default: user cache dir)", TakesFile: true, Category: "Trust policy"},
	}
}

// policyFromFlags builds the trust policy from trustFlags. Problems with the
// flags themselves are usage errors; unreadable files are failures.
func policyFromFlags(c *cli.Context) (*sign.Policy, error) {
	opts := sign.PolicyOptions{
		CertificateIdentity:         c.String("certificate-identity"),
		CertificateIdentityRegexp:   c.String("certificate-identity-regexp"),
		CertificateOIDCIssuer:       c.String("certificate-oidc-issuer"),
		CertificateOIDCIssuerRegexp: c.String("certificate-oidc-issuer-regexp"),
		GitHubWorkflowRepository:    c.String("certificate-github-workflow-repository"),
		GitHubWorkflowRef:           c.String("certificate-github-workflow-ref"),
		GitHubWorkflowTrigger:       c.String("certificate-github-workflow-trigger"),
		GitHubWorkflowSHA:           c.String("certificate-github-workflow-sha"),
		GitHubWorkflowName:          c.String("certificate-github-workflow-name"),
	}
	keyless := opts.CertificateIdentity != "" || opts.CertificateIdentityRegexp != "" ||
		opts.CertificateOIDCIssuer != "" || opts.CertificateOIDCIssuerRegexp != ""
	if key := c.String("key"); key != "" {
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
		// --trusted-root, else the public-good root, fetched only when a
		// bundle carries them.
		if file := c.String("trusted-root"); file != "" {
			tm, err := sign.LoadTrustedRoot(c.Context, file, "")
			if err != nil {
				return nil, failf("%v", err)
			}
			opts.TrustedMaterial = tm
		} else {
			cache := c.String("tuf-cache")
			opts.LoadTrustedMaterial = func(ctx context.Context) (root.TrustedMaterial, error) {
				return sign.LoadTrustedRoot(ctx, "", cache)
			}
		}
	} else if keyless {
		if opts.CertificateIdentity == "" && opts.CertificateIdentityRegexp == "" {
			return nil, usageErrorf("--certificate-identity or --certificate-identity-regexp is required")
		}
		if opts.CertificateOIDCIssuer == "" && opts.CertificateOIDCIssuerRegexp == "" {
			return nil, usageErrorf("--certificate-oidc-issuer or --certificate-oidc-issuer-regexp is required")
		}
		tm, err := sign.LoadTrustedRoot(c.Context, c.String("trusted-root"), c.String("tuf-cache"))
		if err != nil {
			return nil, failf("%v", err)
		}
		opts.TrustedMaterial = tm
	} else {
		return nil, usageErrorf("no trust policy: give --key PUBLIC_KEY, or --certificate-identity (or -regexp) with --certificate-oidc-issuer")
	}
	p, err := sign.NewPolicy(opts)
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	return p, nil
}
