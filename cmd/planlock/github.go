package main

import (
	"os"
	"strings"

	"github.com/planlock/planlock/gitapprove"
	"github.com/urfave/cli/v2"
)

// githubOptions are the flags naming the GitHub repository pull requests go
// to, shared by approve, doctor and the proxy's hold pull requests.
type githubOptions struct {
	GitHubAPI  string
	GitHubRepo string
}

// flags takes the commands' own wording of the two flags (and a help
// category, "" for none), so each reads right in its help.
func (o *githubOptions) flags(category, apiUsage, repoUsage string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "github-api", Usage: apiUsage, Category: category, Destination: &o.GitHubAPI},
		&cli.StringFlag{Name: "github-repo", Usage: repoUsage, Category: category, Destination: &o.GitHubRepo},
	}
}

// credentials are the tokens of the environment, with the host of
// --github-api declared GitHub.
func (o *githubOptions) credentials() gitapprove.Credentials {
	return gitapprove.CredentialsFromEnv(os.Getenv).WithGitHubAPI(o.GitHubAPI)
}

// forge is the GitHub client for remote (gitapprove.NewForge), nil with the
// reason when Git alone is used; a bad --github-api or --github-repo, or a
// token that would go over plain http, is a usage error of cmd.
func (o *githubOptions) forge(cmd string, creds gitapprove.Credentials, remote string) (gitapprove.Forge, string, error) {
	f, why, err := gitapprove.NewForge(creds, gitapprove.ForgeOptions{RemoteURL: remote, APIURL: o.GitHubAPI, Repo: o.GitHubRepo})
	if err != nil {
		return nil, "", usageErrorf("%s: %v", cmd, strings.TrimPrefix(err.Error(), gitapprove.ErrBadForgeOptions.Error()+": "))
	}
	return f, why, nil
}
