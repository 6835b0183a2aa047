package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/internal/boundedio"
	"github.com/urfave/cli/v2"
)

// writeTrustBlock prints the operator config that trusts what the workflow
// signs: its keyless identity on the protected branch. The repository comes
// from the checkout's origin when there is one.
func writeTrustBlock(c *cli.Context, dir, branch string) {
	repo := "OWNER/REPO"
	note := "  # replace OWNER/REPO with the repository on GitHub"
	if r, err := gitapprove.Open(dir, gitapprove.Options{}); err == nil {
		if u, err := r.RemoteURL(); err == nil {
			if rr, err := gitapprove.ParseRemoteURL(u); err == nil && rr.Host == "github.com" {
				repo, note = rr.Owner+"/"+rr.Name, ""
			}
		}
	}
	fmt.Fprintf(c.App.Writer, `
Trust what this workflow signs: put this in the operator config of every
machine that runs planlock proxy ($XDG_CONFIG_HOME/planlock/config.hcl,
default ~/.config/planlock/config.hcl; see planlock config):

certificate_identity    = "https://github.com/%s/%s@refs/heads/%s"%s
certificate_oidc_issuer = "https://token.actions.githubusercontent.com"
`, repo, gitapprove.WorkflowPath, branch, note)
}

func initCommand() *cli.Command {
	return &cli.Command{
		Name:  "init",
		Usage: "set a repository up for planlock approvals",
		Subcommands: []*cli.Command{
			{
				Name:  "github",
				Usage: "write the GitHub Actions workflow: validate on pull request, sign on merge",
				Description: `Writes .github/workflows/planlock.yml. On pull requests that touch plans it
runs "planlock plan fmt --check" and "planlock plan validate" and posts (or
updates) the "planlock plan show" summary as a comment. On pushes to the
protected branch it signs every changed plan and merged hold request keyless
(permissions: id-token: write) and publishes each bundle as
<file>.sigstore.json, at the file's path, on the planlock/approvals branch,
which only that workflow writes. The proxy fetches bundles from there; it
trusts them because their signatures verify, not because of the branch.
See docs/approvals.md.

Examples:
   planlock init github
   planlock init github --dir ../plans-repo --plans-glob 'agents/**/*.hcl' --branch release`,
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "dir", Value: ".", Usage: "repository root to write into"},
					&cli.StringFlag{Name: "plans-glob", Value: "plans/**/*.hcl", Usage: "plan files (GitHub paths filter and bash globstar syntax)"},
					&cli.StringFlag{Name: "holds-glob", Value: "holds/**/*.hcl", Usage: "hold request files"},
					&cli.StringFlag{Name: "branch", Value: "main", Usage: "the protected branch approvals are merged into"},
					&cli.StringFlag{Name: "approvals-branch", Value: gitapprove.DefaultApprovalsBranch, Usage: "branch the workflow publishes bundles on"},
					&cli.StringFlag{Name: "planlock-version", Value: "latest", Usage: "planlock version the workflow installs with go install"},
					&cli.BoolFlag{Name: "from-source", Usage: "build planlock from the checked-out repository (for the planlock repository itself)"},
					&cli.StringFlag{Name: "go-version", Value: "stable", Usage: "Go version for actions/setup-go"},
					&cli.BoolFlag{Name: "force", Usage: "overwrite a workflow file that differs"},
				},
				Action: func(c *cli.Context) error {
					if c.NArg() != 0 {
						return usageErrorf("init github: takes no arguments (use --dir)")
					}
					wf, err := gitapprove.GitHubWorkflow(gitapprove.WorkflowOptions{
						PlansGlob: c.String("plans-glob"), HoldsGlob: c.String("holds-glob"),
						Branch: c.String("branch"), Approvals: c.String("approvals-branch"),
						PlanlockVersion: c.String("planlock-version"), FromSource: c.Bool("from-source"),
						GoVersion: c.String("go-version"),
					})
					if err != nil {
						return usageErrorf("init github: %v", err)
					}
					path := filepath.Join(c.String("dir"), filepath.FromSlash(gitapprove.WorkflowPath))
					old, err := boundedio.ReadFile(path, boundedio.MaxConfigBytes)
					switch {
					case err == nil && bytes.Equal(old, wf):
						fmt.Fprintf(c.App.Writer, "%s is up to date.\n", path)
						fmt.Fprintln(c.App.Writer, initTrustFlags(c.String("branch")))
						writeTrustBlock(c, c.String("dir"), c.String("branch"))
						return nil
					case err == nil && !c.Bool("force"):
						return failf("init github: %s exists and differs; use --force to overwrite it", path)
					case err != nil && !errors.Is(err, fs.ErrNotExist):
						return failf("init github: %v", err)
					}
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						return failf("init github: %v", err)
					}
					if err := os.WriteFile(path, wf, 0o644); err != nil {
						return failf("init github: %v", err)
					}
					fmt.Fprintf(c.App.Writer, "Wrote %s. Commit it, protect %s (require pull request reviews), and see docs/approvals.md.\n", path, c.String("branch"))
					fmt.Fprintln(c.App.Writer, initTrustFlags(c.String("branch")))
					writeTrustBlock(c, c.String("dir"), c.String("branch"))
					return nil
				},
			},
		},
	}
}

// initTrustFlags is the trust policy for the bundles the workflow signs:
// its identity on the protected branch, run by a push (a merge), never by a
// pull request event.
func initTrustFlags(branch string) string {
	return "Trust its approvals in planlock verify and planlock proxy with:\n" +
		"  --certificate-identity https://github.com/OWNER/REPO/" + gitapprove.WorkflowPath + "@refs/heads/" + branch + " \\\n" +
		"  --certificate-oidc-issuer https://token.actions.githubusercontent.com \\\n" +
		"  --certificate-github-workflow-trigger push"
}
