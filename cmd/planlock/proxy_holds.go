package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/internal/approvals"
	"github.com/planlock/planlock/proxy"
	"github.com/planlock/planlock/proxy/holdreq"
	"github.com/planlock/planlock/proxy/ledger"
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

// holdApprovals sets up approval pull requests for holds: the plan's Git
// repository (a private bare clone under the state directory), GitHub when
// a token and a GitHub remote are there, and the trust policy that verifies
// merged holds. Without a remote (or with --no-hold-prs) holds are approved
// in the state directory with planlock holds approve (localApprovals).
func (o *proxyOptions) holdApprovals(ctx context.Context, l proxyState) (holdGate, error) {
	planFile, errw := o.Plan, o.errw
	if o.NoHoldPRs {
		return o.localApprovals(ctx, l)
	}
	remote := o.GitRemote
	var planPath string
	dir := o.PlansRepo
	explicit := dir != ""
	if dir == "" {
		dir = filepath.Dir(planFile)
	}
	if u := o.Repo; u != "" && !explicit {
		// GitOps: holds go to the repository the plan comes from.
		if remote == "" {
			remote = u
		}
		planPath = planFile
	} else if repo, err := gitapprove.Open(dir, gitapprove.Options{}); err == nil {
		if rel, err := repo.RelPath(planFile); err == nil {
			planPath = rel
		}
		if remote == "" {
			u, err := repo.RemoteURL()
			if err != nil && explicit {
				return nil, failf("--plans-repo %s: %v", dir, err)
			}
			remote = u
			if why := o.noHoldSigner(repo.Root()); u != "" && !explicit && why != "" {
				errw("planlock: holds are approved with planlock holds approve (kept in the state only): " + why + " (give --plans-repo or --git-remote to make them pull requests anyway)")
				return o.localApprovals(ctx, l)
			}
		}
	} else if explicit {
		return nil, failf("--plans-repo: %v", err)
	}
	if p := o.Path; p != "" {
		planPath = p // the plan's path in the repository, as signed
	}
	if remote == "" {
		errw("planlock: holds are approved with planlock holds approve (kept in the state only): the plan is not in a Git checkout with a remote (give --plans-repo or --git-remote to make them pull requests)")
		return o.localApprovals(ctx, l)
	}
	policy, err := o.holdPolicy(ctx)
	if err != nil {
		return nil, err
	}
	if policy == nil {
		errw("planlock: WARNING: no trust policy (--insecure-skip-verify): hold pull requests are opened, but no merged hold can run")
	}
	creds := o.credentials()
	forge, why, err := o.forge("proxy", creds, remote)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(remote))
	cache := filepath.Join(l.Dir(), "git", hex.EncodeToString(sum[:8]))
	base, approvalsBranch, statusCache := o.HoldsBase, o.ApprovalsBranch, o.HoldStatusCache
	lazy := approvals.Lazy(func(ctx context.Context) (approvals.PRBackend, error) {
		repo, err := gitapprove.OpenCache(ctx, remote, cache, gitapprove.Options{Credentials: creds})
		if err != nil {
			return nil, err
		}
		return &gitapprove.Holds{Repo: repo, Forge: forge, Base: base, Approvals: approvalsBranch, StatusCache: statusCache}, nil
	})
	a, err := approvals.New(approvals.Config{Store: l, PRs: lazy, Policy: policy, PlanPath: planPath,
		OpenWait: o.HoldOpenWait, Log: o.IO.err})
	if err != nil {
		return nil, failf("%v", err)
	}
	where := "Git only: " + why
	if forge != nil {
		where = "GitHub pull requests"
	}
	errw(fmt.Sprintf("planlock: holds become approval pull requests on %s (%s; approvals from %s)", redactURL(remote), where, approvalsBranch))
	if gh, ok := forge.(*gitapprove.GitHub); ok {
		_, _ = checkProtection(ctx, gh, base, errw)
	}
	return a, nil
}

// noHoldSigner says why a hold merged in the checkout at root could never
// run, "" when it could: the checkout's planlock workflow (planlock init
// github) signs what is merged keyless, and the proxy trusts a --key. That
// is a plan run from a checkout that is not its plans repository, such as
// an example in planlock's own source: its holds stay on this machine
// instead of becoming pull requests on that clone's origin.
func (o *proxyOptions) noHoldSigner(root string) string {
	if o.Key == "" {
		return ""
	}
	if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(gitapprove.WorkflowPath))); err != nil {
		return ""
	}
	return fmt.Sprintf("the checkout %s signs merged holds keyless (%s), and the trust policy is --key %s", root, gitapprove.WorkflowPath, o.Key)
}

// redactURL drops any user information from a remote URL before it is logged.
func redactURL(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	if at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@"); at >= 0 {
		rest = rest[at+1:]
	}
	return scheme + "://" + rest
}

var _ approvals.Verifier = (*sign.Policy)(nil)

// holdGate decides held calls; Close it before the ledger.
type holdGate interface {
	proxy.HoldApprover
	Close()
}

// holdApprover keeps a nil holdGate a nil interface.
func holdApprover(a holdGate) proxy.HoldApprover {
	if a == nil {
		return nil
	}
	return a
}

// localApprovals decides holds from the state directory: the proxy writes
// each hold's request file there and honours the hold approval that
// planlock holds approve signs, once the operator's trust policy verifies it.
func (o *proxyOptions) localApprovals(ctx context.Context, l proxyState) (holdGate, error) {
	policy, err := o.holdPolicy(ctx)
	if err != nil {
		return nil, err
	}
	a, err := approvals.New(approvals.Config{Store: l, PRs: &approvals.Local{StateDir: l.Dir()}, Policy: policy,
		OpenWait: o.HoldOpenWait, Log: o.IO.err})
	if err != nil {
		return nil, failf("%v", err)
	}
	// The holds commands read the same config file; a directory given on
	// the command line or in the environment must be passed on.
	where := ""
	if o.typed("state") || o.typed("state-root") {
		where = " --state " + shellQuote(l.Dir())
	}
	return &localApprover{Approvals: a, where: where}, nil
}

// localApprover words the answers for holds approved with planlock holds
// approve instead of pull requests.
type localApprover struct {
	*approvals.Approvals
	where string // the --state flag the holds commands need, if any
}

func (la *localApprover) Decide(ctx context.Context, r holdreq.Request) holdreq.Decision {
	d := la.Approvals.Decide(ctx, r)
	h := d.Hold
	switch {
	case d.Outcome == holdreq.Held && h.ID != "":
		d.Message = fmt.Sprintf("held: %s; needs approval (hold %s, expires %s). Ask the user to approve exactly this call with `planlock holds approve%s --key KEY %s` (or to reject it with `planlock holds reject%s %s`), then repeat exactly the same call.",
			h.Reason, h.ID, h.Expires.UTC().Format(time.RFC3339), la.where, h.ID, la.where, h.ID)
	case d.Outcome == holdreq.Refused && h.State == ledger.HoldRejected:
		d.Message = fmt.Sprintf("rejected: hold %s for exactly this call was refused (planlock holds reject); do not retry this call", h.ID)
	case d.Outcome == holdreq.Refused:
		d.Message = strings.Replace(d.Message, " was merged, but ", " was approved, but ", 1)
	}
	return d
}

// shellQuote quotes s for a command the user copies.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n\"'\\$`;&|<>()*?[]{}!#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// holdPolicy is the trust policy hold approvals are verified with: the
// proxy's own, or nil without trust flags (then no approval can run).
func (o *proxyOptions) holdPolicy(ctx context.Context) (approvals.Verifier, error) {
	if o.trustGiven() == "" {
		return nil, nil
	}
	return o.policy(ctx)
}
