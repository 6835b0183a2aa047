package planrun

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/internal/approvals"
	"github.com/planlock/planlock/proxy"
	"github.com/planlock/planlock/proxy/holdreq"
	"github.com/planlock/planlock/proxy/ledger"
)

// HoldOptions say how held calls are approved: by approval pull requests
// on the plan's repository, or in the state with planlock holds approve.
type HoldOptions struct {
	// NoPRs keeps holds in the state (--no-hold-prs).
	NoPRs bool
	// PlansRepo is the Git checkout the plan lives in (--plans-repo);
	// empty: the one containing PlanFile.
	PlansRepo string
	// GitRemote is the remote hold requests are pushed to (--git-remote);
	// empty: the checkout's origin, or RepoURL.
	GitRemote string
	// Base is the branch hold pull requests merge into (--holds-base).
	Base string
	// ApprovalsBranch is where CI publishes approval bundles.
	ApprovalsBranch string
	// OpenWait bounds how long a held call waits for its pull request.
	OpenWait time.Duration
	// StatusCache is how long a pending status is re-used.
	StatusCache time.Duration
	// GitHubAPI and GitHubRepo name the GitHub repository (--github-api,
	// --github-repo); empty: from the remote URL.
	GitHubAPI, GitHubRepo string
	// Credentials are the Git and GitHub tokens.
	Credentials gitapprove.Credentials
	// Command names the command in a usage error ("proxy", "serve").
	Command string

	// RepoURL is the repository the plan is taken from (--repo); holds go
	// there unless PlansRepo is given.
	RepoURL string
	// PlanFile is the plan file (with RepoURL: its path in the repository).
	PlanFile string
	// PlanPath, when set, is the plan's path in the repository as signed.
	PlanPath string
	// KeyFile is the trust policy's --key, if any: a checkout whose
	// workflow signs merged holds keyless keeps holds local with it.
	KeyFile string
	// Policy verifies merged holds; nil: no merged hold can run.
	Policy approvals.Verifier
	// LocalWhere, when set, is the --state flag (with a leading space)
	// the holds commands need to find a hold kept in the state directory
	// dir; nil: they find it without one.
	LocalWhere func(dir string) string
	// OnGitHub, when set, is called once with the GitHub client (to check
	// the branch protection).
	OnGitHub func(ctx context.Context, gh *gitapprove.GitHub, base string)

	// Log gets the one-line notices; LogWriter the approvals' own lines.
	Log       func(string)
	LogWriter io.Writer
}

// Approver decides held calls; Close it before the state.
type Approver interface {
	proxy.HoldApprover
	Close()
}

func (o *HoldOptions) log(s string) {
	if o.Log != nil {
		o.Log(s)
	}
}

// Check refuses GitHub options that could open no pull request on any
// remote (--github-repo not OWNER/REPO, --github-api not https), so that
// a command serving many plans says so at start, not once per plan.
func (o HoldOptions) Check() error {
	if o.NoPRs || (o.GitHubAPI == "" && o.GitHubRepo == "") {
		return nil
	}
	// The token and the remote only make NewForge look at the options.
	c := o.Credentials
	c.GitHubToken = "check"
	_, _, err := gitapprove.NewForge(c, gitapprove.ForgeOptions{RemoteURL: "https://github.com/owner/repo.git", APIURL: o.GitHubAPI, Repo: o.GitHubRepo})
	return forgeErr(o.Command, err)
}

// forgeErr is a forge options error as a usage error of cmd.
func forgeErr(cmd string, err error) error {
	if err == nil {
		return nil
	}
	return usagef("%s: %s", cmd, strings.TrimPrefix(err.Error(), gitapprove.ErrBadForgeOptions.Error()+": "))
}

// OpenApprovals sets up approval pull requests for holds: the plan's Git
// repository (a private bare clone under the state's directory), GitHub
// when a token and a GitHub remote are there, and the trust policy that
// verifies merged holds. Without a remote (or with NoPRs) holds are
// approved in the state with planlock holds approve.
func OpenApprovals(ctx context.Context, o HoldOptions, st State) (Approver, error) {
	if o.NoPRs {
		return localApprovals(o, st)
	}
	remote := o.GitRemote
	var planPath string
	dir := o.PlansRepo
	explicit := dir != ""
	if dir == "" {
		dir = filepath.Dir(o.PlanFile)
	}
	if u := o.RepoURL; u != "" && !explicit {
		// GitOps: holds go to the repository the plan comes from.
		if remote == "" {
			remote = u
		}
		planPath = o.PlanFile
	} else if repo, err := gitapprove.Open(dir, gitapprove.Options{}); err == nil {
		if rel, err := repo.RelPath(o.PlanFile); err == nil {
			planPath = rel
		}
		if remote == "" {
			u, err := repo.RemoteURL()
			if err != nil && explicit {
				return nil, fmt.Errorf("--plans-repo %s: %w", dir, err)
			}
			remote = u
			if why := noHoldSigner(o.KeyFile, repo.Root()); u != "" && !explicit && why != "" {
				o.log("planlock: holds are approved with planlock holds approve (kept in the state only): " + why + " (give --plans-repo or --git-remote to make them pull requests anyway)")
				return localApprovals(o, st)
			}
		}
	} else if explicit {
		return nil, fmt.Errorf("--plans-repo: %w", err)
	}
	if o.PlanPath != "" {
		planPath = o.PlanPath // the plan's path in the repository, as signed
	}
	if remote == "" {
		o.log("planlock: holds are approved with planlock holds approve (kept in the state only): the plan is not in a Git checkout with a remote (give --plans-repo or --git-remote to make them pull requests)")
		return localApprovals(o, st)
	}
	if o.Policy == nil {
		o.log("planlock: WARNING: no trust policy (--insecure-skip-verify): hold pull requests are opened, but no merged hold can run")
	}
	creds := o.Credentials
	forge, why, err := gitapprove.NewForge(creds, gitapprove.ForgeOptions{RemoteURL: remote, APIURL: o.GitHubAPI, Repo: o.GitHubRepo})
	if err != nil {
		return nil, forgeErr(o.Command, err)
	}
	sum := sha256.Sum256([]byte(remote))
	cache := filepath.Join(st.Dir(), "git", hex.EncodeToString(sum[:8]))
	base, approvalsBranch, statusCache := o.Base, o.ApprovalsBranch, o.StatusCache
	lazy := approvals.Lazy(func(ctx context.Context) (approvals.PRBackend, error) {
		repo, err := gitapprove.OpenCache(ctx, remote, cache, gitapprove.Options{Credentials: creds})
		if err != nil {
			return nil, err
		}
		return &gitapprove.Holds{Repo: repo, Forge: forge, Base: base, Approvals: approvalsBranch, StatusCache: statusCache}, nil
	})
	a, err := approvals.New(approvals.Config{Store: st, PRs: lazy, Policy: o.Policy, PlanPath: planPath,
		OpenWait: o.OpenWait, Log: o.LogWriter})
	if err != nil {
		return nil, err
	}
	where := "Git only: " + why
	if forge != nil {
		where = "GitHub pull requests"
	}
	o.log(fmt.Sprintf("planlock: holds become approval pull requests on %s (%s; approvals from %s)", RedactURL(remote), where, approvalsBranch))
	if gh, ok := forge.(*gitapprove.GitHub); ok && o.OnGitHub != nil {
		o.OnGitHub(ctx, gh, base)
	}
	return a, nil
}

// noHoldSigner says why a hold merged in the checkout at root could never
// run, "" when it could: the checkout's planlock workflow (planlock init
// github) signs what is merged keyless, and the trust policy is a --key.
// That is a plan run from a checkout that is not its plans repository,
// such as an example in planlock's own source: its holds stay on this
// machine instead of becoming pull requests on that clone's origin.
func noHoldSigner(key, root string) string {
	if key == "" {
		return ""
	}
	if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(gitapprove.WorkflowPath))); err != nil {
		return ""
	}
	return fmt.Sprintf("the checkout %s signs merged holds keyless (%s), and the trust policy is --key %s", root, gitapprove.WorkflowPath, key)
}

// RedactURL drops any user information from a remote URL before it is logged.
func RedactURL(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	if at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@"); at >= 0 {
		rest = rest[at+1:]
	}
	return scheme + "://" + rest
}

// localApprovals decides holds from the state: the gate writes each hold's
// request file in the state's directory and honours the hold approval
// that planlock holds approve signs, once the trust policy verifies it.
func localApprovals(o HoldOptions, st State) (Approver, error) {
	a, err := approvals.New(approvals.Config{Store: st, PRs: &approvals.Local{StateDir: st.Dir()}, Policy: o.Policy,
		OpenWait: o.OpenWait, Log: o.LogWriter})
	if err != nil {
		return nil, err
	}
	where := ""
	if o.LocalWhere != nil {
		where = o.LocalWhere(st.Dir())
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
