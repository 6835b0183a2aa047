package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/sign"
	"github.com/urfave/cli/v2"
)

// reconcileManifest is always written to --out, so the workflow's artifact
// exists even when nothing needed signing.
const reconcileManifest = "planlock-reconcile.txt"

func reconcileCommand() *cli.Command {
	o := &reconcileOptions{}
	return &cli.Command{
		Name:  "reconcile",
		Usage: "sign every plan and hold file whose exact bytes have no valid approval yet",
		Description: `Lists every plan and hold file at HEAD of the checkout (--plans-glob,
--holds-glob), reads each one's bundle from the fetched approvals branch
(origin/planlock/approvals), verifies it against the trust policy (the trust
flags: normally the signing workflow's own identity), and signs every file
whose bundle is missing or does not verify. The new bundles are written to
--out at <path>.sigstore.json, for the workflow's publish job to push.

It decides by verifying, not by diffing pushes: a run that was cancelled,
failed (Fulcio down) or never happened is made good by the next run. With a
GitHub token ($GH_TOKEN or $GITHUB_TOKEN) each approval records the merged
pull request that last changed the file and the logins whose latest review
of it is an approval.

Signing is keyless (GitHub Actions OIDC) unless --signing-key is given.

Examples:
   planlock reconcile --out "$RUNNER_TEMP/bundles" \
     --certificate-identity https://github.com/acme/plans/.github/workflows/planlock.yml@refs/heads/main \
     --certificate-oidc-issuer https://token.actions.githubusercontent.com \
     --certificate-github-workflow-trigger push,schedule
   planlock reconcile --dry-run --key planlock.pub
   planlock reconcile --signing-key planlock.key --key planlock.pub --out bundles

Exit status: 0 when every file has (or now has) an approval, 1 when one
could not be signed, 2 on usage errors.`,
		Flags:  o.flags(),
		Action: action(o, runReconcile),
	}
}

// reconcileOptions are the flags of planlock reconcile.
type reconcileOptions struct {
	cmdline
	trustOptions    // verifies the bundles already published
	Dir             string
	PlansGlob       string
	HoldsGlob       string
	ApprovalsBranch string
	Out             string
	DryRun          bool
	SigningKey      string
	FulcioURL       string
	RekorURL        string
	TlogUpload      bool
	TSAURL          string
	Repository      string
	GitHubAPI       string
}

func (o *reconcileOptions) flags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "dir", Value: ".", Usage: "the checkout of the protected branch", TakesFile: true, Destination: &o.Dir},
		&cli.StringFlag{Name: "plans-glob", Value: "plans/**/*.hcl", Usage: "plan files (bash globstar syntax)", Destination: &o.PlansGlob},
		&cli.StringFlag{Name: "holds-glob", Value: "holds/**/*.hcl", Usage: "hold request files", Destination: &o.HoldsGlob},
		&cli.StringFlag{Name: "approvals-branch", Value: gitapprove.DefaultApprovalsBranch, Usage: "branch the bundles are published on", Destination: &o.ApprovalsBranch},
		&cli.StringFlag{Name: "out", Usage: "write new bundles under `DIR` (required unless --dry-run)", TakesFile: true, Destination: &o.Out},
		&cli.BoolFlag{Name: "dry-run", Usage: "only list the files that need signing", Destination: &o.DryRun},
		&cli.StringFlag{Name: "signing-key", Usage: "sign with this PEM private key `FILE` or hashivault://KEYNAME (default: keyless)", TakesFile: true, Category: "Signing", Destination: &o.SigningKey},
		&cli.StringFlag{Name: "fulcio-url", Value: sign.DefaultFulcioURL, Usage: "Fulcio `URL` (keyless)", Category: "Signing", Destination: &o.FulcioURL},
		&cli.StringFlag{Name: "rekor-url", Usage: "Rekor `URL` (default: as planlock sign)", Category: "Signing", Destination: &o.RekorURL},
		&cli.BoolFlag{Name: "tlog-upload", Value: true, Usage: "log the signatures in Rekor", Category: "Signing", Destination: &o.TlogUpload},
		&cli.StringFlag{Name: "tsa-url", Usage: "also get an RFC 3161 timestamp from this `URL`", Category: "Signing", Destination: &o.TSAURL},
		&cli.StringFlag{Name: "repository", Usage: "GitHub `OWNER/REPO` for the pull request lookup (default: $GITHUB_REPOSITORY)", Category: "Approval", Destination: &o.Repository},
		&cli.StringFlag{Name: "github-api", Usage: "GitHub API `URL` (default: $GITHUB_API_URL, else https://api.github.com)", Category: "Approval", Destination: &o.GitHubAPI},
	}, o.trustOptions.flags()...)
}

func runReconcile(ctx context.Context, o *reconcileOptions) error {
	if len(o.Args) != 0 {
		return usageErrorf("reconcile: takes no arguments (use --dir)")
	}
	out := o.Out
	if out == "" && !o.DryRun {
		return usageErrorf("reconcile: give --out DIR for the new bundles (or --dry-run)")
	}
	for _, g := range []struct{ name, v string }{{"plans-glob", o.PlansGlob}, {"holds-glob", o.HoldsGlob}} {
		if v := g.v; v == "" || strings.HasPrefix(v, "/") || strings.Contains(v, "..") {
			return usageErrorf("reconcile: --%s %q: want a relative pattern like plans/**/*.hcl", g.name, v)
		}
	}
	policy, err := o.policy(ctx)
	if err != nil {
		return err
	}
	repo, err := gitapprove.Open(o.Dir, gitapprove.Options{})
	if err != nil {
		return failf("reconcile: %v", err)
	}
	head, err := repo.Head()
	if err != nil {
		return failf("reconcile: %v", err)
	}
	files, err := repo.Reconcile(ctx, gitapprove.ReconcileOptions{
		Head: head, PlansGlob: o.PlansGlob, HoldsGlob: o.HoldsGlob, Approvals: o.ApprovalsBranch,
		Valid: func(ctx context.Context, path, kind string, content, bundle []byte) error {
			_, err := policy.Verify(ctx, sign.VerifyInput{Path: path, Content: content, Bundle: bundle, Kind: sign.Kind(kind)})
			return err
		},
	})
	if err != nil {
		return failf("%v", err)
	}
	var missing []gitapprove.ApprovalFile
	for _, f := range files {
		if f.Problem == "" {
			fmt.Fprintf(o.IO.out, "%s: approved\n", f.Path)
			continue
		}
		missing = append(missing, f)
	}
	if o.DryRun {
		for _, f := range missing {
			fmt.Fprintf(o.IO.out, "%s: needs signing (%s)\n", f.Path, f.Problem)
		}
		fmt.Fprintf(o.IO.out, "%d of %s need signing.\n", len(missing), plural(len(files), "file", "files"))
		return nil
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return failf("reconcile: %v", err)
	}
	var manifest strings.Builder
	failed := 0
	if len(missing) > 0 {
		s, err := o.newSigner(ctx, head.String())
		if err != nil {
			return err
		}
		for _, f := range missing {
			dest, err := s.sign(ctx, repo, head, f, out)
			if err != nil {
				failed++
				fmt.Fprintf(o.IO.err, "planlock: reconcile: %s: %v\n", f.Path, err)
				continue
			}
			fmt.Fprintf(&manifest, "%s\n", f.Path)
			fmt.Fprintf(o.IO.out, "%s: signed %s (%s) -> %s\n", f.Path, f.Kind, f.Problem, dest)
		}
	}
	if err := os.WriteFile(filepath.Join(out, reconcileManifest), []byte(manifest.String()), 0o644); err != nil {
		return failf("reconcile: %v", err)
	}
	if failed > 0 {
		return failf("reconcile: %d of %s could not be signed; the next run tries again", failed, plural(len(missing), "file", "files"))
	}
	fmt.Fprintf(o.IO.out, "%d of %s signed now.\n", len(missing), plural(len(files), "file", "files"))
	return nil
}

// reconcileSigner signs the files reconcile found, with the approval
// record the run knows plus, per file, its pull request and approvers.
type reconcileSigner struct {
	opts sign.SignOptions
	base sign.Predicate
	gh   *gitapprove.GitHub // nil: no pull request lookup
}

func (o *reconcileOptions) newSigner(ctx context.Context, head string) (*reconcileSigner, error) {
	s := &reconcileSigner{opts: sign.SignOptions{FulcioURL: o.FulcioURL, TSAURL: o.TSAURL}}
	base, err := sign.PredicateFromGitHub(os.Getenv, os.ReadFile)
	if err != nil {
		return nil, failf("reconcile: %v", err)
	}
	if o.given("repository") {
		base.Repository = o.Repository
	}
	// The approval is of the file as it is at the reconciled commit; a
	// keyless certificate names the same commit (the run's).
	switch {
	case base.Commit == "":
		base.Commit = head
	case !strings.EqualFold(base.Commit, head):
		// The predicate's commit must be the one whose bytes are signed.
		return nil, failf("reconcile: the checkout is at %s but the run is for commit %s: check out the run's commit", head, base.Commit)
	}
	s.base = base
	if o.TlogUpload {
		s.opts.RekorURL = o.RekorURL
		if s.opts.RekorURL == "" && o.TrustedRoot != "" {
			tm, err := sign.LoadTrustedRoot(ctx, o.TrustedRoot, "")
			if err != nil {
				return nil, failf("reconcile: %v", err)
			}
			s.opts.RekorURL = sign.RekorURL(tm, time.Now())
		}
	} else if o.SigningKey == "" {
		return nil, usageErrorf("reconcile: --tlog-upload=false needs --signing-key: keyless approvals must be logged in Rekor")
	}
	if key := o.SigningKey; key != "" {
		kp, err := sign.LoadSigningKey(ctx, key, os.ReadFile)
		if err != nil {
			return nil, failf("reconcile: %v", err)
		}
		s.opts.Keypair = kp
	} else {
		tok, err := sign.IDToken(ctx, os.Getenv, &http.Client{Timeout: 30 * time.Second})
		if err != nil {
			return nil, failf("reconcile: %v", err)
		}
		if tok == "" {
			return nil, failf("reconcile: keyless signing needs an OIDC token: run in GitHub Actions with \"permissions: id-token: write\", set SIGSTORE_ID_TOKEN, or give --signing-key")
		}
		s.opts.IDToken = tok
	}
	// The token goes only where gitapprove.Credentials allows it.
	if creds := gitapprove.CredentialsFromEnv(os.Getenv); creds.GitHubToken != "" && base.Repository != "" {
		owner, name, ok := strings.Cut(base.Repository, "/")
		if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
			return nil, usageErrorf("reconcile: repository %q: want OWNER/REPO", base.Repository)
		}
		api := o.GitHubAPI
		if api == "" {
			api = os.Getenv("GITHUB_API_URL")
		}
		gh, _, err := creds.Forge(gitapprove.ForgeOptions{APIURL: api, Repo: base.Repository})
		if err != nil {
			return nil, usageErrorf("reconcile: %v", strings.TrimPrefix(err.Error(), gitapprove.ErrBadForgeOptions.Error()+": "))
		}
		s.gh = gh
	}
	return s, nil
}

func (s *reconcileSigner) sign(ctx context.Context, repo *gitapprove.Repo, head plumbing.Hash, f gitapprove.ApprovalFile, out string) (string, error) {
	pred := s.base
	pred.Kind = sign.Kind(f.Kind)
	pred.Path = f.Path
	// Who approved is the pull request that brought these bytes, not
	// whatever the run's own commit was.
	pred.PullRequest, pred.Approvers = 0, nil
	if s.gh != nil {
		commit, err := repo.LastChange(head, f.Path)
		if err != nil {
			return "", err
		}
		pr, ok, err := s.gh.MergedPR(ctx, commit.String())
		if err != nil {
			return "", fmt.Errorf("find the pull request that approved it: %w", err)
		}
		if ok {
			pred.PullRequest = pr.Number
			if pred.Approvers, err = s.gh.Approvers(ctx, pr.Number); err != nil {
				return "", fmt.Errorf("read the approvals of pull request #%d: %w", pr.Number, err)
			}
		}
	}
	signed, err := sign.Sign(ctx, f.Content, pred, s.opts)
	if err != nil {
		return "", err
	}
	clean, err := sign.CleanPath(f.Path)
	if err != nil {
		return "", err
	}
	dest := filepath.Join(out, filepath.FromSlash(clean)+gitapprove.BundleSuffix)
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return "", err
	}
	if err := sign.WriteBundle(dest, signed.Bundle); err != nil {
		return "", err
	}
	return dest, nil
}
