package main

import (
	"context"
	"fmt"

	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/boundedio"
	"github.com/urfave/cli/v2"
)

func approveCommand() *cli.Command {
	o := &approveOptions{}
	return &cli.Command{
		Name:      "approve",
		Usage:     "open (or update) the pull request that approves a plan",
		ArgsUsage: "PATH",
		Description: `Validates the plan, commits it on branch planlock/approve/<plan name> (made
from the base branch; your work tree and current branch are not touched,
and the plan is staged as committed so that git pull after the merge
fast-forwards), pushes it
and opens the pull request. Its body is the "planlock plan show" summary
and, when the base branch has an approved version of the file, what the
change gives the agent more or less power to do. Running it again updates
the same branch and pull request. Once that pull request is merged (also
squash or rebase) or closed, the branch starts again from the base. A
branch whose last commit someone else made is not added to unless
--allow-other-author is given. The plan's tests (<plan>_test.hcl beside
it), when there are any, go in the same pull request; they are not signed.

The pull request is opened with GH_TOKEN (else GITHUB_TOKEN) for remotes on
github.com, a GHE.com tenant (*.ghe.com), or a GitHub Enterprise host named
by GH_HOST, GITHUB_SERVER_URL or --github-api; that token is sent to those
hosts only, over https only. Another https Git host gets PLANLOCK_GIT_TOKEN.
Without a token or a GitHub remote the branch is still pushed and planlock
prints how to open the pull request.

Examples:
   planlock approve plans/refund.hcl
   planlock approve --base release plans/refund.hcl
   GH_HOST=ghe.example.com planlock approve plans/refund.hcl`,
		Flags:  o.flags(),
		Action: action(o, runApprove),
	}
}

// approveOptions are the flags of planlock approve.
type approveOptions struct {
	cmdline
	githubOptions
	Base             string
	Remote           string
	AllowOtherAuthor bool
	JSON             bool
}

func (o *approveOptions) flags() []cli.Flag {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "base", Usage: "branch the plan is approved into (default: the remote's default branch)", Destination: &o.Base},
		&cli.StringFlag{Name: "remote", Value: "origin", Usage: "Git remote to push to", Destination: &o.Remote},
	}
	flags = append(flags, o.githubOptions.flags("", "GitHub API base URL, e.g. https://ghe.example.com/api/v3 (default: from the remote URL)", "OWNER/REPO on GitHub (default: from the remote URL)")...)
	return append(flags,
		&cli.BoolFlag{Name: "allow-other-author", Usage: "add the commit on top of an approval branch whose last commit someone else made (refused otherwise)", Destination: &o.AllowOtherAuthor},
		&cli.BoolFlag{Name: "json", Usage: "print the result as JSON on standard output", Destination: &o.JSON},
	)
}

func runApprove(ctx context.Context, o *approveOptions) error {
	if len(o.Args) != 1 {
		return usageErrorf("approve: give exactly one plan file")
	}
	path := o.Args[0]
	src, err := boundedio.ReadFile(path, boundedio.MaxPlanBytes)
	if err != nil {
		return failf("approve: %v", err)
	}
	plan, diags := hclplan.Parse(path, src)
	if diags.HasErrors() {
		files := sources{}
		files.add(path, src)
		writeDiagnostics(o.IO.err, files, diags)
		return failf("approve: %s is not a valid plan", path)
	}
	creds := o.credentials()
	repo, err := gitapprove.Open(path, gitapprove.Options{Remote: o.Remote, Credentials: creds})
	if err != nil {
		return failf("approve: %v", err)
	}
	rel, err := repo.RelPath(path)
	if err != nil {
		return failf("approve: %v", err)
	}
	remoteURL, err := repo.RemoteURL()
	if err != nil {
		return failf("approve: %v", err)
	}
	forge, why, err := o.forge("approve", creds, remoteURL)
	if err != nil {
		return err
	}
	if forge == nil {
		o.errw("planlock: " + why + ": pushing the branch only")
	}
	if gh, ok := forge.(*gitapprove.GitHub); ok {
		_, _ = checkProtection(ctx, gh, o.Base, o.errw)
	}
	req := gitapprove.ApproveRequest{Repo: repo, Forge: forge, Path: rel, Src: src, Plan: plan, Base: o.Base, AllowOtherAuthor: o.AllowOtherAuthor}
	if err := approveTests(path, repo, &req); err != nil { // plan_tests.go
		return err
	}
	res, err := gitapprove.Approve(ctx, req)
	if err != nil {
		return failf("approve: %v", err)
	}
	// The author's clone pulls the reviewer's merge next: stage the files
	// as committed, so that the pull is not refused over them.
	staged := map[string][]byte{rel: src}
	if req.TestsPath != "" {
		staged[req.TestsPath] = req.Tests
	}
	if _, err := repo.StageFiles(staged); err != nil {
		o.errw(fmt.Sprintf("planlock: warning: could not stage %s in your checkout (%v): run git add on it before you git pull the merge", rel, err))
	}
	if res.Restarted != "" {
		fmt.Fprintf(o.IO.err, "planlock: branch %s started again from %s: %s\n", res.Branch, res.Base, res.Restarted)
	}
	if res.Warning != "" {
		fmt.Fprintf(o.IO.err, "planlock: warning: %s\n", res.Warning)
	}
	if o.JSON {
		if err := writeJSONEscaped(o.IO.out, newApproveJSON(plan, res)); err != nil {
			return failf("approve: %v", err)
		}
		return nil
	}
	switch {
	case res.AlreadyApproved:
		fmt.Fprintf(o.IO.out, "Plan %s is already approved on %s: nothing to do.\n", plan.Name, res.Base)
	case res.PR != nil:
		fmt.Fprintln(o.IO.out, res.PR.URL)
	default:
		fmt.Fprintln(o.IO.out, res.Next)
	}
	return nil
}

// approveEnv are the variables approve reads.
func approveEnv() []envVar { return append([]envVar{noColorEnv}, githubEnv...) }
