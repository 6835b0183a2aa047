package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/proxy/planload"
)

const repoCategory = "Plans from Git (GitOps)"

// repoOptions are the proxy's flags for plans taken from a Git repository.
type repoOptions struct {
	Repo         string
	RepoInterval time.Duration
	RepoBranch   string
}

func (o *repoOptions) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "repo", Usage: "take --plan (a path in this repository) from the default branch of Git `URL` and its bundle from the approvals branch; fetch and reload when either moves", Category: repoCategory, Destination: &o.Repo},
		&cli.DurationFlag{Name: "repo-interval", Value: 30 * time.Second, Usage: "ask the --repo remote whether a branch moved every `DURATION` (one ls-remote; a fetch only when one did)", Category: repoCategory, Destination: &o.RepoInterval},
		&cli.StringFlag{Name: "repo-branch", Usage: "`BRANCH` the plan is read from (default: the remote's default branch)", Category: repoCategory, Destination: &o.RepoBranch},
	}
}

// planSource is where the plan comes from: the --plan file, or with
// --repo the local copy a RepoSync keeps of the plans repository (nil
// without --repo). With --repo the first sync happens here: a proxy starts
// only on a plan it could fetch, or on the copy a previous run left.
func (o *proxyOptions) planSource(ctx context.Context) (planload.Source, *planload.RepoSync, error) {
	url := o.Repo
	if url == "" {
		src, err := o.source(ctx, &o.cmdline)
		return src, nil, err
	}
	for _, f := range []string{"bundle", "path"} {
		if o.given(f) {
			return planload.Source{}, nil, usageErrorf("--%s does not go with --repo: --plan is the plan's path in the repository and its bundle is on the approvals branch", f)
		}
	}
	p := o.Plan
	if p == "" || strings.HasPrefix(p, "/") || path.Clean(p) != p || strings.HasPrefix(p, "../") || p == ".." || strings.Contains(p, "\\") {
		return planload.Source{}, nil, usageErrorf("--plan %q: with --repo give the plan's path in the repository, e.g. plans/refund.hcl", p)
	}
	var src planload.Source
	if !o.InsecureSkipVerify {
		if o.trustGiven() == "" {
			return src, nil, usageErrorf("%s", noTrustPolicy)
		}
		policy, err := o.policy(ctx)
		if err != nil {
			return src, nil, err
		}
		src.Policy = policy
	}
	state := o.State
	if state == "" {
		d, err := ledger.DefaultDir()
		if err != nil {
			return src, nil, failf("state directory: %v", err)
		}
		state = d
	}
	sum := sha256.Sum256([]byte(url + "\x00" + p))
	dir := filepath.Join(state, "repo", hex.EncodeToString(sum[:8]))
	creds := gitapprove.CredentialsFromEnv(os.Getenv)
	rs := &planload.RepoSync{
		OpenRepo: func(ctx context.Context) (*gitapprove.Repo, error) {
			return gitapprove.OpenRefCache(ctx, url, filepath.Join(dir, "git"), gitapprove.Options{Credentials: creds})
		},
		Path: p, Branch: o.RepoBranch, Approvals: o.ApprovalsBranch,
		Dir: filepath.Join(dir, "plan"), Log: o.errw,
	}
	src.File, src.Path = rs.File(), rs.Path
	if _, err := rs.Sync(ctx); err != nil {
		if _, serr := os.Stat(rs.File()); serr != nil {
			return src, nil, failf("plans repository %s: %v", redactURL(url), err)
		}
		o.errw(fmt.Sprintf("planlock: plans repository %s: %v; starting on the copy of %s fetched earlier (verified again now)", redactURL(url), err, p))
	}
	return src, rs, nil
}
