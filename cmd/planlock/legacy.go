package main

import (
	"github.com/planlock/planlock/sign"
	"github.com/urfave/cli/v2"
)

// Bridges for the commands still reading flags by name; they go once every
// command reads its options struct.

func trustFlags() []cli.Flag { return (&trustOptions{}).flags() }

func trustFromContext(c *cli.Context) *trustOptions {
	return &trustOptions{
		CertificateIdentity:         c.String("certificate-identity"),
		CertificateIdentityRegexp:   c.String("certificate-identity-regexp"),
		CertificateOIDCIssuer:       c.String("certificate-oidc-issuer"),
		CertificateOIDCIssuerRegexp: c.String("certificate-oidc-issuer-regexp"),
		GitHubWorkflowRepository:    c.String("certificate-github-workflow-repository"),
		GitHubWorkflowRef:           c.String("certificate-github-workflow-ref"),
		GitHubWorkflowTrigger:       c.String("certificate-github-workflow-trigger"),
		GitHubWorkflowSHA:           c.String("certificate-github-workflow-sha"),
		GitHubWorkflowName:          c.String("certificate-github-workflow-name"),
		Key:                         c.String("key"),
		TrustedRoot:                 c.String("trusted-root"),
		TUFCache:                    c.String("tuf-cache"),
	}
}

func policyFromFlags(c *cli.Context) (*sign.Policy, error) {
	return trustFromContext(c).policy(c.Context)
}
