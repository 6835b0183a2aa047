package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/planlock/planlock/gitapprove"
	"github.com/urfave/cli/v2"
)

// doctorOptions are the flags of planlock doctor.
type doctorOptions struct {
	cmdline
	githubOptions
	Dir             string
	Branch          string
	ApprovalsBranch string
	Remote          string
}

func (o *doctorOptions) flags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "dir", Value: ".", Usage: "the plans repository checkout", TakesFile: true, Destination: &o.Dir},
		&cli.StringFlag{Name: "branch", Usage: "the protected branch (default: the repository's default branch)", Destination: &o.Branch},
		&cli.StringFlag{Name: "approvals-branch", Value: gitapprove.DefaultApprovalsBranch, Usage: "the branch bundles are published on", Destination: &o.ApprovalsBranch},
		&cli.StringFlag{Name: "remote", Value: "origin", Usage: "Git remote of the repository", Destination: &o.Remote},
	}, o.githubOptions.flags("", "GitHub API `URL` (default: from the remote)", "GitHub `OWNER/REPO` (default: from the remote)")...)
}

func doctorCommand() *cli.Command {
	o := &doctorOptions{}
	return &cli.Command{
		Name:  "doctor",
		Usage: "check the repository protection and workflow planlock's approvals rely on",
		Description: `Checks, for the plans repository checked out in --dir:

  - the branch rules of the protected branch (GitHub's GET
    /repos/{owner}/{repo}/rules/branches/{branch}, with $GH_TOKEN or
    $GITHUB_TOKEN): pull request required, approving review, code-owner
    review, stale approvals dismissed, approval of the most recent push, the
    "planlock check" check required;
  - the signing workflow: present, every action pinned by commit SHA, signing
    by reconcile, the sign job without a write token;
  - CODEOWNERS names owners for plans, holds and workflows;
  - the approvals branch exists on the remote;

and prints the trust flags that accept the workflow's approvals.

Examples:
   planlock doctor
   GH_TOKEN=$(gh auth token) planlock doctor --dir ../plans --branch main

Exit status: 0 when every check passes, 1 when one does not, 2 on usage errors.`,
		Flags:  o.flags(),
		Action: action(o, runDoctor),
	}
}

func runDoctor(ctx context.Context, o *doctorOptions) error {
	if len(o.Args) != 0 {
		return usageErrorf("doctor: takes no arguments (use --dir)")
	}
	w := o.IO.out
	bad := 0
	report := func(ok bool, format string, a ...any) {
		mark := "ok  "
		if !ok {
			mark = "FAIL"
			bad++
		}
		fmt.Fprintf(w, "%s %s\n", mark, fmt.Sprintf(format, a...))
	}
	creds := o.credentials()
	repo, err := gitapprove.Open(o.Dir, gitapprove.Options{Remote: o.Remote, Credentials: creds})
	if err != nil {
		return failf("doctor: %v", err)
	}
	root := repo.Root()

	// The protected branch's rules.
	remoteURL, err := repo.RemoteURL()
	if err != nil {
		return failf("doctor: %v", err)
	}
	forge, why, err := o.forge("doctor", creds, remoteURL)
	if err != nil {
		return err
	}
	branch := o.Branch
	slug := "OWNER/REPO"
	if gh, ok := forge.(*gitapprove.GitHub); ok {
		slug = gh.Slug()
		var warnings []string
		rules, err := checkProtection(ctx, gh, branch, func(s string) { warnings = append(warnings, s) })
		if err != nil {
			report(false, "branch rules: %v", err)
		} else {
			branch = rules.Branch
			report(rules.PullRequest, "branch %s requires a pull request", branch)
			report(rules.RequiredApprovals >= 1, "branch %s requires %d approving review(s)", branch, rules.RequiredApprovals)
			report(rules.CodeOwnerReview, "branch %s requires code-owner review", branch)
			report(rules.DismissStale, "branch %s dismisses stale approvals on push", branch)
			report(rules.LastPushApproval, "branch %s requires approval of the most recent push", branch)
			report(slices.Contains(rules.RequiredChecks, gitapprove.CheckName), "branch %s requires the %q check", branch, gitapprove.CheckName)
		}
	} else {
		report(false, "branch rules not checked: %s (set GH_TOKEN, or give --github-repo)", why)
	}
	if branch == "" {
		branch = "main"
	}

	// The signing workflow.
	wfPath := filepath.Join(root, filepath.FromSlash(gitapprove.WorkflowPath))
	wf, err := os.ReadFile(wfPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		report(false, "%s is missing: run planlock init github", gitapprove.WorkflowPath)
	case err != nil:
		report(false, "%s: %v", gitapprove.WorkflowPath, err)
	default:
		report(true, "%s is present", gitapprove.WorkflowPath)
		un := gitapprove.UnpinnedUses(wf)
		report(len(un) == 0, "every action in it is pinned by commit SHA%s", listNote(un))
		report(bytes.Contains(wf, []byte("planlock reconcile")), "it signs by reconcile (every file without a valid approval, not only the pushed ones)")
		report(!bytes.Contains(wf, []byte("cancel-in-progress: true")), "no run of it cancels another")
	}
	owners, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(gitapprove.CodeownersPath)))
	report(err == nil && bytes.Contains(owners, []byte(gitapprove.CodeownersMarker)), "%s names owners for plans, holds and workflows", gitapprove.CodeownersPath)

	// The approvals branch.
	if err := repo.Fetch(ctx); err != nil {
		report(false, "fetch %s: %v", repo.RemoteName(), err)
	} else {
		_, ok, err := repo.RemoteBranchHash(o.ApprovalsBranch)
		report(ok && err == nil, "branch %s exists on %s (it appears after the first signing run)", o.ApprovalsBranch, repo.RemoteName())
	}

	fmt.Fprintln(w)
	fmt.Fprintln(w, strings.Replace(initTrustFlags(branch), "OWNER/REPO", slug, 1))
	if bad > 0 {
		return failf("doctor: %s failed", plural(bad, "check", "checks"))
	}
	return nil
}

func listNote(xs []string) string {
	if len(xs) == 0 {
		return ""
	}
	return ": not " + strings.Join(xs, ", ")
}
