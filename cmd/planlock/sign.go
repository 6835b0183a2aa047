package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/boundedio"
	"github.com/planlock/planlock/sign"
	"github.com/urfave/cli/v2"
)

func signCommand() *cli.Command {
	o := &signOptions{}
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
schemes are refused). A key signature is logged in Rekor when --rekor-url is
given or --trusted-root names a log (cosign's default); --tlog-upload=false
opts out. Without a log entry or --tsa-url timestamp, the signing time in the
approval is only claimed by the signer (see docs/signing.md).

In GitHub Actions the repository, ref, merge commit, pull request and merger
come from the environment and event payload; the flags override them.

A plan (--kind plan) that has expired is refused (exit 1); one that expires
within a day is signed with a warning.

Examples:
   planlock sign plans/refund.hcl                     # in the sign-on-merge workflow
   planlock sign --key ~/.config/planlock/planlock.key plans/refund.hcl
   planlock sign --key planlock.key --trusted-root trusted_root.json plans/refund.hcl   # logged in its Rekor
   VAULT_ADDR=https://vault.example:8200 planlock sign --key hashivault://planlock-ci plans/refund.hcl
   planlock sign --key planlock.key --kind hold --pr 18 holds/refund-4711/h1.hcl
   planlock sign --fulcio-url https://fulcio.example --rekor-url https://rekor.example plans/*.hcl`,
		Flags:  o.flags(),
		Action: action(o, runSign),
	}
}

// signOptions are the flags of planlock sign.
type signOptions struct {
	cmdline
	Key         string
	Out         string
	Kind        string
	Path        string
	FulcioURL   string
	RekorURL    string
	TrustedRoot string
	TlogUpload  bool
	TSAURL      string
	Repository  string
	Ref         string
	Commit      string
	PR          int
	Approver    cli.StringSlice
}

func (o *signOptions) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "key", EnvVars: []string{"PLANLOCK_SIGNING_KEY"}, Usage: "sign with this PEM private key `FILE` or Vault transit key hashivault://KEYNAME (default: keyless)", TakesFile: true, Destination: &o.Key},
		&cli.StringFlag{Name: "out", Usage: "write the bundle to `FILE` (one PATH only; default PATH.sigstore.json)", TakesFile: true, Destination: &o.Out},
		&cli.StringFlag{Name: "kind", Value: string(sign.KindPlan), Usage: "approval `KIND`: plan or hold", Destination: &o.Kind},
		&cli.StringFlag{Name: "path", Usage: "the file's `PATH` in the repository (one PATH only; default: relative to the Git checkout)", Destination: &o.Path},
		&cli.StringFlag{Name: "fulcio-url", Value: sign.DefaultFulcioURL, Usage: "Fulcio `URL` (keyless)", Category: "Sigstore", Destination: &o.FulcioURL},
		&cli.StringFlag{Name: "rekor-url", Usage: "Rekor `URL` (default: the log --trusted-root names, else keyless " + sign.DefaultRekorURL + ", with --key none)", Category: "Sigstore", Destination: &o.RekorURL},
		&cli.StringFlag{Name: "trusted-root", Usage: "sigstore trusted_root.json `FILE` whose transparency log signatures are logged in", TakesFile: true, Category: "Sigstore", Destination: &o.TrustedRoot},
		&cli.BoolFlag{Name: "tlog-upload", Value: true, Usage: "log the signature in Rekor; --tlog-upload=false signs a key approval without a log entry", Category: "Sigstore", Destination: &o.TlogUpload},
		&cli.StringFlag{Name: "tsa-url", Usage: "also get an RFC 3161 timestamp from this `URL`", Category: "Sigstore", Destination: &o.TSAURL},
		&cli.StringFlag{Name: "repository", Usage: "repository `OWNER/REPO` (default: $GITHUB_REPOSITORY)", Category: "Approval", Destination: &o.Repository},
		&cli.StringFlag{Name: "ref", Usage: "Git `REF` the file was approved on (default: from GitHub Actions)", Category: "Approval", Destination: &o.Ref},
		&cli.StringFlag{Name: "commit", Usage: "merge commit `SHA` (default: from GitHub Actions)", Category: "Approval", Destination: &o.Commit},
		&cli.IntFlag{Name: "pr", Usage: "pull request `NUMBER` (default: from the GitHub event)", Category: "Approval", Destination: &o.PR},
		&cli.StringSliceFlag{Name: "approver", Usage: "who approved (`LOGIN`, repeatable; default: who merged)", Category: "Approval", Destination: &o.Approver},
	}
}

func runSign(ctx context.Context, o *signOptions) error {
	if len(o.Args) == 0 {
		return usageErrorf("sign: give at least one file")
	}
	if len(o.Args) > 1 && (o.given("out") || o.given("path")) {
		return usageErrorf("sign: --out and --path take one file only")
	}
	kind, err := sign.ParseKind(o.Kind)
	if err != nil {
		return usageErrorf("sign: --kind: %v", err)
	}
	if o.PR < 0 {
		return usageErrorf("sign: --pr must be a pull request number")
	}
	base, err := sign.PredicateFromGitHub(os.Getenv, func(p string) ([]byte, error) { return boundedio.ReadFile(p, boundedio.MaxEventBytes) })
	if err != nil {
		return failf("sign: %v", err)
	}
	base.Kind = kind
	if o.given("repository") {
		base.Repository = o.Repository
	}
	if o.given("ref") {
		base.Ref = o.Ref
	}
	if o.given("commit") {
		base.Commit = o.Commit
	}
	if o.given("pr") {
		base.PullRequest = o.PR
	}
	if o.given("approver") {
		base.Approvers = o.Approver.Value()
	}

	if kind == sign.KindPlan {
		// Before any signature: an expired plan would be refused by every
		// proxy, so signing it can only mislead.
		for _, file := range o.Args {
			if err := checkExpiry(o.IO.err, file, time.Now()); err != nil {
				return err
			}
		}
	}

	opts := sign.SignOptions{FulcioURL: o.FulcioURL, TSAURL: o.TSAURL}
	if opts.RekorURL, err = o.rekorURL(ctx); err != nil {
		return err
	}
	if key := o.Key; key != "" {
		kp, err := sign.LoadSigningKey(ctx, key, func(p string) ([]byte, error) { return boundedio.ReadFile(p, boundedio.MaxKeyBytes) })
		if err != nil {
			return failf("sign: %v", err)
		}
		opts.Keypair = kp
	} else {
		tok, err := sign.IDToken(ctx, os.Getenv, &http.Client{Timeout: 30 * time.Second})
		if err != nil {
			return failf("sign: %v", err)
		}
		if tok == "" {
			return failf("sign: keyless signing needs an OIDC token: run in GitHub Actions with \"permissions: id-token: write\", set SIGSTORE_ID_TOKEN, or sign with --key")
		}
		opts.IDToken = tok
	}

	// Said once unless --tlog-upload=false chose it: the approval's signing
	// time then rests on the signer's word alone.
	if opts.Keypair != nil && opts.RekorURL == "" && opts.TSAURL == "" && o.TlogUpload {
		o.errw("planlock: sign: no transparency log entry or timestamp: the signing time is claimed by the signer (give --rekor-url or --trusted-root to log it, or --tsa-url)")
	}
	for _, file := range o.Args {
		pred := base
		pred.Path = o.Path
		if pred.Path == "" {
			if pred.Path, err = sign.RepoPath(file); err != nil {
				return failf("sign: %v", err)
			}
		}
		content, err := boundedio.ReadFile(file, sign.MaxFileBytes(kind))
		if err != nil {
			return failf("sign: %v", err)
		}
		signed, err := sign.Sign(ctx, content, pred, opts)
		if err != nil {
			return failf("sign: %v", err)
		}
		out := o.Out
		if out == "" {
			out = sign.BundlePath(file)
		}
		if err := sign.WriteBundle(out, signed.Bundle); err != nil {
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
		fmt.Fprintf(o.IO.out, "%s: signed %s as %s by %s%s -> %s\n", file, pred.Kind, signed.Predicate.Path, who, logged, out)
	}
	return nil
}

// rekorURL is the transparency log to sign into: --rekor-url, else the
// log --trusted-root names; "" for a key signature without one (keyless
// then uses the public-good log). --tlog-upload=false opts a key signature
// out; keyless approvals must be logged, since verifiers refuse them
// otherwise.
func (o *signOptions) rekorURL(ctx context.Context) (string, error) {
	if !o.TlogUpload {
		switch {
		case o.Key == "":
			return "", usageErrorf("sign: --tlog-upload=false needs --key: keyless approvals must be logged in Rekor")
		case o.given("rekor-url"):
			return "", usageErrorf("sign: --rekor-url and --tlog-upload=false contradict each other: give one")
		}
		return "", nil
	}
	if u := o.RekorURL; u != "" {
		return u, nil
	}
	file := o.TrustedRoot
	if file == "" {
		return "", nil
	}
	tm, err := sign.LoadTrustedRoot(ctx, file, "")
	if err != nil {
		return "", failf("sign: %v", err)
	}
	u := sign.RekorURL(tm, time.Now())
	if u == "" {
		return "", failf("sign: trusted root %s names no transparency log valid now: give --rekor-url, or --tlog-upload=false", file)
	}
	return u, nil
}

// checkExpiry refuses a plan that has expired and warns about one that
// expires within a day. A file that does not parse is left to the signature
// (sign signs bytes; plan validate judges them).
func checkExpiry(w io.Writer, file string, now time.Time) error {
	src, err := boundedio.ReadFile(file, boundedio.MaxPlanBytes)
	if err != nil {
		return failf("sign: %v", err)
	}
	p, _ := hclplan.Parse(file, src)
	if p == nil || p.Expires.IsZero() {
		return nil
	}
	at := p.Expires.UTC().Format(time.RFC3339)
	switch {
	case p.Expired(now):
		return failf("sign: %s: plan %q expired at %s; set a later expires (or remove it), approve the plan again and sign that", file, p.Name, at)
	case p.Expires.Sub(now) <= 24*time.Hour:
		fmt.Fprintf(w, "planlock: warning: %s: plan %q expires at %s, in %s; the proxy refuses it from then on\n",
			file, p.Name, at, p.Expires.Sub(now).Round(time.Minute))
	}
	return nil
}

// signEnv are the variables sign reads (package sign: GitHub Actions and
// the OIDC token; the Vault client: VAULT_*).
func signEnv() []envVar {
	return []envVar{
		{"SIGSTORE_ID_TOKEN", "OIDC token for keyless signing outside GitHub Actions"},
		{"ACTIONS_ID_TOKEN_REQUEST_URL", "GitHub Actions: where the job's OIDC token is requested"},
		{"ACTIONS_ID_TOKEN_REQUEST_TOKEN", "GitHub Actions: the token for that request"},
		{"GITHUB_ACTIONS", "\"true\" in GitHub Actions: the approval comes from the environment"},
		{"GITHUB_REPOSITORY", "default --repository"},
		{"GITHUB_REF", "default --ref"},
		{"GITHUB_SHA", "default --commit"},
		{"GITHUB_EVENT_PATH", "the event payload: default --pr and --approver"},
		{"VAULT_ADDR", "Vault server for --key hashivault://KEY (BAO_ADDR for openbao://)"},
		{"VAULT_TOKEN", "Vault token for --key hashivault://KEY (BAO_TOKEN for openbao://)"},
		{"TRANSIT_SECRET_ENGINE_PATH", "Vault transit mount (default transit)"},
	}
}
