package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

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
the same branch and pull request. The plan's tests (<plan>_test.hcl beside
it), when there are any, go in the same pull request; they are not signed.

The pull request is opened with GITHUB_TOKEN (or GH_TOKEN) for remotes on
github.com, or on a GitHub Enterprise host named by GH_HOST or by
--github-api. Without a token or a GitHub remote the branch is still pushed
and planlock prints how to open the pull request.

Examples:
   planlock approve plans/refund.hcl
   planlock approve --base release plans/refund.hcl
   GH_HOST=ghe.example.com planlock approve plans/refund.hcl`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "base", Usage: "branch the plan is approved into (default: the remote's default branch)"},
			&cli.StringFlag{Name: "remote", Value: "origin", Usage: "Git remote to push to"},
			&cli.StringFlag{Name: "github-api", Usage: "GitHub API base URL, e.g. https://ghe.example.com/api/v3 (default: from the remote URL)"},
			&cli.StringFlag{Name: "github-repo", Usage: "OWNER/REPO on GitHub (default: from the remote URL)"},
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
			token := gitapprove.TokenFromEnv(os.Getenv)
			repo, err := gitapprove.Open(path, gitapprove.Options{Remote: c.String("remote"), Token: token})
			if err != nil {
				return failf("approve: %v", err)
			}
			rel, err := repo.RelPath(path)
			if err != nil {
				return failf("approve: %v", err)
			}
			forge, why, err := approveForge(c, repo, token)
			if err != nil {
				return err
			}
			if forge == nil {
				fmt.Fprintf(c.App.ErrWriter, "planlock: %s: pushing the branch only\n", why)
			}
			if gh, ok := forge.(*gitapprove.GitHub); ok {
				_, _ = checkProtection(c.Context, gh, c.String("base"), func(s string) { fmt.Fprintln(c.App.ErrWriter, s) })
			}
			req := gitapprove.ApproveRequest{Repo: repo, Forge: forge, Path: rel, Src: src, Plan: plan, Base: c.String("base")}
			if err := approveTests(path, repo, &req); err != nil { // plan_tests.go
				return err
			}
			res, err := gitapprove.Approve(c.Context, req)
			if err != nil {
				return failf("approve: %v", err)
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

// approveForge picks the forge: explicit flags first, else from the remote.
func approveForge(c *cli.Context, repo *gitapprove.Repo, token string) (gitapprove.Forge, string, error) {
	api, slug := c.String("github-api"), c.String("github-repo")
	if api == "" && slug == "" {
		f, why := gitapprove.ForgeFor(repo, token, os.Getenv)
		return f, why, nil
	}
	if token == "" {
		return nil, "no GITHUB_TOKEN or GH_TOKEN set", nil
	}
	owner, name, ok := strings.Cut(slug, "/")
	if slug == "" {
		u, err := repo.RemoteURL()
		if err != nil {
			return nil, "", failf("approve: %v", err)
		}
		rr, err := gitapprove.ParseRemoteURL(u)
		if err != nil {
			return nil, "", failf("approve: %v: give --github-repo OWNER/REPO", err)
		}
		owner, name, ok = rr.Owner, rr.Name, true
	}
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return nil, "", usageErrorf("approve: --github-repo wants OWNER/REPO, not %q", slug)
	}
	if api == "" {
		api = "https://api.github.com"
	}
	if !strings.HasPrefix(api, "https://") && !strings.HasPrefix(api, "http://127.0.0.1") && !strings.HasPrefix(api, "http://localhost") {
		return nil, "", usageErrorf("approve: --github-api must be an https URL (the token is sent there)")
	}
	web := strings.TrimSuffix(strings.TrimSuffix(api, "/"), "/api/v3")
	if web == "https://api.github.com" {
		web = "https://github.com"
	}
	return gitapprove.NewGitHub(gitapprove.GitHubOptions{APIURL: api, WebURL: web, Owner: owner, Repo: name, Token: token}), "", nil
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
