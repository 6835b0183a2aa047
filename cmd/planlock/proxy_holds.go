package main

import (
	"context"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/internal/approvals"
	"github.com/planlock/planlock/internal/planrun"
	"github.com/planlock/planlock/sign"
)

const holdsCategory = "Holds as pull requests"

// holdOptions are the proxy's flags for holds as pull requests. The trust
// policy flags that verify plans also verify hold approvals.
type holdOptions struct {
	githubOptions
	PlansRepo       string
	GitRemote       string
	HoldsBase       string
	ApprovalsBranch string
	HoldOpenWait    time.Duration
	HoldStatusCache time.Duration
	NoHoldPRs       bool
}

func (o *holdOptions) flags() []cli.Flag {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "plans-repo", Usage: "Git checkout `DIR` the plan lives in (default: the one containing --plan)", TakesFile: true, Category: holdsCategory, Destination: &o.PlansRepo},
		&cli.StringFlag{Name: "git-remote", Usage: "push hold requests to this remote `URL` (default: the checkout's origin)", Category: holdsCategory, Destination: &o.GitRemote},
		&cli.StringFlag{Name: "holds-base", Usage: "`BRANCH` hold pull requests merge into (default: the remote's default branch)", Category: holdsCategory, Destination: &o.HoldsBase},
		&cli.StringFlag{Name: "approvals-branch", Value: gitapprove.DefaultApprovalsBranch, Usage: "`BRANCH` where CI publishes approval bundles", Category: holdsCategory, Destination: &o.ApprovalsBranch},
	}
	flags = append(flags, o.githubOptions.flags(holdsCategory, "GitHub API base `URL` for hold pull requests (default: from the remote URL)", "`OWNER/REPO` on GitHub (default: from the remote URL)")...)
	return append(flags,
		&cli.DurationFlag{Name: "hold-open-wait", Value: 5 * time.Second, Usage: "a held call waits at most `DURATION` for its pull request to open (it goes on in the background)", Category: holdsCategory, Destination: &o.HoldOpenWait},
		&cli.DurationFlag{Name: "hold-status-cache", Value: 15 * time.Second, Usage: "a repeated held call re-uses its hold's pending status for `DURATION` (one fetch and one GitHub request per period; 0: ask every time)", Category: holdsCategory, Destination: &o.HoldStatusCache},
		&cli.BoolFlag{Name: "no-hold-prs", Usage: "keep holds in the state, approved with planlock holds approve (no Git, no pull requests)", Category: holdsCategory, Destination: &o.NoHoldPRs},
	)
}

// holds are the gate's hold options (internal/planrun) for cmd ("proxy",
// "serve") and the plan file (with --repo, its path in the repository):
// pull requests on the repository the plan lives in, verified by the
// trust policy that verifies plans; or, with --no-hold-prs or no remote,
// holds kept in the state and approved with planlock holds approve.
func (o *holdOptions) holds(ctx context.Context, cl *cmdline, t *trustOptions, cmd, planFile string) (planrun.HoldOptions, error) {
	policy, err := holdPolicy(ctx, cl, t)
	if err != nil {
		return planrun.HoldOptions{}, err
	}
	return planrun.HoldOptions{
		NoPRs: o.NoHoldPRs, PlansRepo: o.PlansRepo, GitRemote: o.GitRemote, Base: o.HoldsBase,
		ApprovalsBranch: o.ApprovalsBranch, OpenWait: o.HoldOpenWait, StatusCache: o.HoldStatusCache,
		GitHubAPI: o.GitHubAPI, GitHubRepo: o.GitHubRepo, Credentials: o.credentials(), Command: cmd,
		PlanFile: planFile, KeyFile: t.Key, Policy: policy,
		OnGitHub: func(ctx context.Context, gh *gitapprove.GitHub, base string) {
			_, _ = checkProtection(ctx, gh, base, cl.errw)
		},
		Log: cl.errw, LogWriter: cl.IO.err,
	}, nil
}

// redactURL drops any user information from a remote URL before it is logged.
func redactURL(u string) string { return planrun.RedactURL(u) }

var _ approvals.Verifier = (*sign.Policy)(nil)

// shellQuote quotes s for a command the user copies.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n\"'\\$`;&|<>()*?[]{}!#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// holdPolicy is the trust policy hold approvals are verified with: the
// command's own, or nil without trust flags (then no approval can run).
func holdPolicy(ctx context.Context, cl *cmdline, t *trustOptions) (approvals.Verifier, error) {
	if cl.trustGiven() == "" {
		return nil, nil
	}
	p, err := t.policy(ctx)
	if err != nil || p == nil {
		return nil, err // no typed nil in the interface
	}
	return p, nil
}
