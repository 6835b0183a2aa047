package main

import (
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/planlock/planlock/internal/boundedio"
	"github.com/planlock/planlock/sign"
	"github.com/urfave/cli/v2"
)

func signCommand() *cli.Command {
	return &cli.Command{
		Name:      "sign",
		Usage:     "sign the exact bytes of plan (or hold) files as an approval",
		ArgsUsage: "PATH ...",
		Description: `Writes PATH.sigstore.json (or --out) for each file: a sigstore bundle holding an
in-toto statement over the file's sha256, named by its path in the repository,
with an approval predicate (kind, path, repository, ref, merge commit, pull
request, approvers, time).

Keyless (the default, meant for CI): an ephemeral key, a Fulcio certificate
for the OIDC token of the GitHub Actions job (it needs "permissions: id-token:
write"), or $SIGSTORE_ID_TOKEN, and a Rekor transparency log entry. With
--key: a PEM private key file (PKCS#8 or SEC1; ECDSA P-256/P-384, Ed25519, RSA
2048+, e.g. from planlock keygen or openssl genpkey), or a HashiCorp Vault
transit key, hashivault://KEYNAME, signed in Vault at $VAULT_ADDR with
$VAULT_TOKEN (mount: $TRANSIT_SECRET_ENGINE_PATH, default transit; other KMS
schemes are refused); no Rekor entry unless --rekor-url is given.

In GitHub Actions the repository, ref, merge commit, pull request and merger
come from the environment and event payload; the flags override them.

Examples:
   planlock sign plans/refund.hcl                     # in the sign-on-merge workflow
   planlock sign --key planlock.key plans/refund.hcl
   VAULT_ADDR=https://vault.example:8200 planlock sign --key hashivault://planlock-ci plans/refund.hcl
   planlock sign --key planlock.key --kind hold --pr 18 holds/refund-4711/h1.hcl
   planlock sign --fulcio-url https://fulcio.example --rekor-url https://rekor.example plans/*.hcl`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "key", Usage: "sign with this PEM private key `FILE` or Vault transit key hashivault://KEYNAME (default: keyless)", TakesFile: true},
			&cli.StringFlag{Name: "out", Usage: "write the bundle to `FILE` (one PATH only; default PATH.sigstore.json)", TakesFile: true},
			&cli.StringFlag{Name: "kind", Value: string(sign.KindPlan), Usage: "approval `KIND`: plan or hold"},
			&cli.StringFlag{Name: "path", Usage: "the file's `PATH` in the repository (one PATH only; default: relative to the Git checkout)"},
			&cli.StringFlag{Name: "fulcio-url", Value: sign.DefaultFulcioURL, Usage: "Fulcio `URL` (keyless)", Category: "Sigstore"},
			&cli.StringFlag{Name: "rekor-url", Usage: "Rekor `URL` (keyless default: " + sign.DefaultRekorURL + "; with --key: no log entry unless set)", Category: "Sigstore"},
			&cli.StringFlag{Name: "tsa-url", Usage: "also get an RFC 3161 timestamp from this `URL`", Category: "Sigstore"},
			&cli.StringFlag{Name: "repository", Usage: "repository `OWNER/REPO` (default: $GITHUB_REPOSITORY)", Category: "Approval"},
			&cli.StringFlag{Name: "ref", Usage: "Git `REF` the file was approved on (default: from GitHub Actions)", Category: "Approval"},
			&cli.StringFlag{Name: "commit", Usage: "merge commit `SHA` (default: from GitHub Actions)", Category: "Approval"},
			&cli.IntFlag{Name: "pr", Usage: "pull request `NUMBER` (default: from the GitHub event)", Category: "Approval"},
			&cli.StringSliceFlag{Name: "approver", Usage: "who approved (`LOGIN`, repeatable; default: who merged)", Category: "Approval"},
		},
		Action: runSign,
	}
}

func runSign(c *cli.Context) error {
	if c.NArg() == 0 {
		return usageErrorf("sign: give at least one file")
	}
	if err := flagAfterArgs(c); err != nil {
		return err
	}
	if c.NArg() > 1 && (c.IsSet("out") || c.IsSet("path")) {
		return usageErrorf("sign: --out and --path take one file only")
	}
	kind, err := sign.ParseKind(c.String("kind"))
	if err != nil {
		return usageErrorf("sign: --kind: %v", err)
	}
	if c.Int("pr") < 0 {
		return usageErrorf("sign: --pr must be a pull request number")
	}
	base, err := sign.PredicateFromGitHub(os.Getenv, func(p string) ([]byte, error) { return boundedio.ReadFile(p, boundedio.MaxEventBytes) })
	if err != nil {
		return failf("sign: %v", err)
	}
	base.Kind = kind
	if c.IsSet("repository") {
		base.Repository = c.String("repository")
	}
	if c.IsSet("ref") {
		base.Ref = c.String("ref")
	}
	if c.IsSet("commit") {
		base.Commit = c.String("commit")
	}
	if c.IsSet("pr") {
		base.PullRequest = c.Int("pr")
	}
	if c.IsSet("approver") {
		base.Approvers = c.StringSlice("approver")
	}

	opts := sign.SignOptions{FulcioURL: c.String("fulcio-url"), RekorURL: c.String("rekor-url"), TSAURL: c.String("tsa-url")}
	if key := c.String("key"); key != "" {
		kp, err := sign.LoadSigningKey(c.Context, key, func(p string) ([]byte, error) { return boundedio.ReadFile(p, boundedio.MaxKeyBytes) })
		if err != nil {
			return failf("sign: %v", err)
		}
		opts.Keypair = kp
	} else {
		tok, err := sign.IDToken(c.Context, os.Getenv, &http.Client{Timeout: 30 * time.Second})
		if err != nil {
			return failf("sign: %v", err)
		}
		if tok == "" {
			return failf("sign: keyless signing needs an OIDC token: run in GitHub Actions with \"permissions: id-token: write\", set SIGSTORE_ID_TOKEN, or sign with --key")
		}
		opts.IDToken = tok
	}

	for _, file := range c.Args().Slice() {
		pred := base
		pred.Path = c.String("path")
		if pred.Path == "" {
			if pred.Path, err = sign.RepoPath(file); err != nil {
				return failf("sign: %v", err)
			}
		}
		content, err := boundedio.ReadFile(file, sign.MaxFileBytes(kind))
		if err != nil {
			return failf("sign: %v", err)
		}
		signed, err := sign.Sign(c.Context, content, pred, opts)
		if err != nil {
			return failf("sign: %v", err)
		}
		out := c.String("out")
		if out == "" {
			out = sign.BundlePath(file)
		}
		if err := os.WriteFile(out, signed.Bundle, 0o644); err != nil {
			return failf("sign: %v", err)
		}
		who := signed.Signer.Identity
		if signed.Signer.Issuer != "" {
			who += " (issuer " + signed.Signer.Issuer + ")"
		}
		logged := ""
		if signed.LogIndex >= 0 {
			logged = fmt.Sprintf(", Rekor log index %d", signed.LogIndex)
		}
		fmt.Fprintf(c.App.Writer, "%s: signed %s as %s by %s%s -> %s\n", file, pred.Kind, signed.Predicate.Path, who, logged, out)
	}
	return nil
}
