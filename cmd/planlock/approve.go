package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/boundedio"
	"github.com/urfave/cli/v2"
)

func approveCommand() *cli.Command {
	return &cli.Command{
		Name:      "approve",
		Usage:     "open (or update) the pull request that approves a plan",
		ArgsUsage: "PATH",
		Description: `Validates the plan, commits it on branch planlock/approve/<plan name> (made
from the base branch; your work tree and index are not touched), pushes it
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
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "base", Usage: "branch the plan is approved into (default: the remote's default branch)"},
			&cli.StringFlag{Name: "remote", Value: "origin", Usage: "Git remote to push to"},
			&cli.StringFlag{Name: "github-api", Usage: "GitHub API base URL, e.g. https://ghe.example.com/api/v3 (default: from the remote URL)"},
			&cli.StringFlag{Name: "github-repo", Usage: "OWNER/REPO on GitHub (default: from the remote URL)"},
			&cli.BoolFlag{Name: "allow-other-author", Usage: "add the commit on top of an approval branch whose last commit someone else made (refused otherwise)"},
			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON on standard output"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageErrorf("approve: give exactly one plan file")
			}
			path := c.Args().First()
			src, err := boundedio.ReadFile(path, boundedio.MaxPlanBytes)
			if err != nil {
				return failf("approve: %v", err)
			}
			plan, diags := hclplan.Parse(path, src)
			if diags.HasErrors() {
				files := sources{}
				files.add(path, src)
				writeDiagnostics(c.App.ErrWriter, files, diags)
				return failf("approve: %s is not a valid plan", path)
			}
			creds := gitapprove.CredentialsFromEnv(os.Getenv).WithGitHubAPI(c.String("github-api"))
			repo, err := gitapprove.Open(path, gitapprove.Options{Remote: c.String("remote"), Credentials: creds})
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
			forge, why, err := forgeFromFlags(c, "approve", creds, remoteURL)
			if err != nil {
				return err
			}
			if forge == nil {
				fmt.Fprintf(c.App.ErrWriter, "planlock: %s: pushing the branch only\n", why)
			}
			if gh, ok := forge.(*gitapprove.GitHub); ok {
				_, _ = checkProtection(c.Context, gh, c.String("base"), func(s string) { fmt.Fprintln(c.App.ErrWriter, s) })
			}
			req := gitapprove.ApproveRequest{Repo: repo, Forge: forge, Path: rel, Src: src, Plan: plan, Base: c.String("base"), AllowOtherAuthor: c.Bool("allow-other-author")}
			if err := approveTests(path, repo, &req); err != nil { // plan_tests.go
				return err
			}
			res, err := gitapprove.Approve(c.Context, req)
			if err != nil {
				return failf("approve: %v", err)
			}
			if res.Restarted != "" {
				fmt.Fprintf(c.App.ErrWriter, "planlock: branch %s started again from %s: %s\n", res.Branch, res.Base, res.Restarted)
			}
			if res.Warning != "" {
				fmt.Fprintf(c.App.ErrWriter, "planlock: warning: %s\n", res.Warning)
			}
			if c.Bool("json") {
				return writeApproveJSON(c, plan, res)
			}
			switch {
			case res.AlreadyApproved:
				fmt.Fprintf(c.App.Writer, "Plan %s is already approved on %s: nothing to do.\n", plan.Name, res.Base)
			case res.PR != nil:
				fmt.Fprintln(c.App.Writer, res.PR.URL)
			default:
				fmt.Fprintln(c.App.Writer, res.Next)
			}
			return nil
		},
	}
}

func writeApproveJSON(c *cli.Context, plan *hclplan.Plan, res gitapprove.ApproveResult) error {
	type jpr struct {
		Number int    `json:"number"`
		URL    string `json:"url"`
		State  string `json:"state"`
	}
	out := struct {
		Plan            string `json:"plan"`
		Digest          string `json:"digest"`
		Branch          string `json:"branch,omitempty"`
		Base            string `json:"base"`
		AlreadyApproved bool   `json:"already_approved"`
		Changed         bool   `json:"changed"`
		PR              *jpr   `json:"pull_request"`
		Next            string `json:"next,omitempty"`
	}{Plan: plan.Name, Digest: plan.Digest, Branch: res.Branch, Base: res.Base, AlreadyApproved: res.AlreadyApproved, Changed: res.Changed, Next: res.Next}
	if res.PR != nil {
		out.PR = &jpr{Number: res.PR.Number, URL: res.PR.URL, State: string(res.PR.State)}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return failf("approve: %v", err)
	}
	_, err = fmt.Fprintf(c.App.Writer, "%s\n", b)
	return err
}

// approveEnv are the variables approve reads.
func approveEnv() []envVar { return append([]envVar{noColorEnv}, githubEnv...) }
