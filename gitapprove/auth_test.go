package gitapprove

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/transport/http"
)

// Which token (if any) goes to which Git remote: the GitHub token to GitHub
// hosts over https only, PLANLOCK_GIT_TOKEN to any other https host.
func TestGitAuthSendsEachTokenOnlyWhereItBelongs(t *testing.T) {
	env := map[string]string{"GH_TOKEN": "gh-tok", "PLANLOCK_GIT_TOKEN": "git-tok"}
	for _, tc := range []struct {
		name string
		url  string
		env  map[string]string // added to env
		want string            // the password sent; "" for no auth
	}{
		{"github.com https", "https://github.com/acme/plans.git", nil, "gh-tok"},
		{"github.com upper case", "https://GitHub.COM/acme/plans.git", nil, "gh-tok"},
		{"github.com plain http", "http://github.com/acme/plans.git", nil, ""},
		{"github.com ssh", "ssh://git@github.com/acme/plans.git", nil, ""},
		{"github.com scp-like", "git@github.com:acme/plans.git", nil, ""},
		{"local path", "/srv/git/plans.git", nil, ""},
		{"file URL", "file:///srv/git/plans.git", nil, ""},
		{"GHE.com tenant", "https://acme.ghe.com/acme/plans.git", nil, "gh-tok"},
		{"GHE.com look-alike", "https://acme.ghe.com.evil.example/acme/plans.git", nil, "git-tok"},
		{"GHE.com nested", "https://x.acme.ghe.com/acme/plans.git", nil, "git-tok"},
		{"github look-alike", "https://github.com.evil.example/acme/plans.git", nil, "git-tok"},
		{"GitLab gets the Git token", "https://gitlab.com/acme/plans.git", nil, "git-tok"},
		{"other host, no Git token", "https://gitlab.com/acme/plans.git", map[string]string{"PLANLOCK_GIT_TOKEN": ""}, ""},
		{"GH_HOST declares Enterprise", "https://ghe.corp.example/acme/plans.git", map[string]string{"GH_HOST": "ghe.corp.example"}, "gh-tok"},
		{"GITHUB_SERVER_URL declares Enterprise", "https://ghe.corp.example/acme/plans.git", map[string]string{"GITHUB_SERVER_URL": "https://ghe.corp.example"}, "gh-tok"},
		{"undeclared Enterprise", "https://ghe.corp.example/acme/plans.git", nil, "git-tok"},
		{"declared host over http", "http://ghe.corp.example/acme/plans.git", map[string]string{"GH_HOST": "ghe.corp.example"}, ""},
		{"GITHUB_TOKEN when no GH_TOKEN", "https://github.com/acme/plans.git", map[string]string{"GH_TOKEN": "", "GITHUB_TOKEN": "actions-tok"}, "actions-tok"},
		{"GH_TOKEN before GITHUB_TOKEN", "https://github.com/acme/plans.git", map[string]string{"GITHUB_TOKEN": "actions-tok"}, "gh-tok"},
		{"no GitHub token: nothing to github.com", "https://github.com/acme/plans.git", map[string]string{"GH_TOKEN": ""}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := map[string]string{}
			for k, v := range env {
				e[k] = v
			}
			for k, v := range tc.env {
				e[k] = v
			}
			a, err := CredentialsFromEnv(func(k string) string { return e[k] }).GitAuth(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if a != nil {
				ba, ok := a.(*http.BasicAuth)
				if !ok || ba.Username != "x-access-token" {
					t.Fatalf("auth = %#v", a)
				}
				got = ba.Password
			}
			if got != tc.want {
				t.Errorf("token sent to %s = %q, want %q", tc.url, got, tc.want)
			}
		})
	}
}

// The forge client: GitHub's API only for GitHub hosts, explicit API URLs
// over https only (loopback http for tests), usage errors for bad flags.
func TestCredentialsForge(t *testing.T) {
	gh := Credentials{GitHubToken: "tok"}
	for _, tc := range []struct {
		name     string
		creds    Credentials
		o        ForgeOptions
		api, web string
		owner    string
		why      string // non-empty: no forge, for this reason
		usage    bool
	}{
		{"github.com", gh, ForgeOptions{RemoteURL: "git@github.com:acme/plans.git"}, "https://api.github.com", "https://github.com", "acme", "", false},
		{"GHE.com", gh, ForgeOptions{RemoteURL: "https://acme.ghe.com/acme/plans.git"}, "https://api.acme.ghe.com", "https://acme.ghe.com", "acme", "", false},
		{"declared Enterprise", Credentials{GitHubToken: "tok", GitHubHosts: []string{"ghe.corp.example"}}, ForgeOptions{RemoteURL: "https://ghe.corp.example/acme/plans.git"}, "https://ghe.corp.example/api/v3", "https://ghe.corp.example", "acme", "", false},
		{"Actions API URL on the same host", Credentials{GitHubToken: "tok", GitHubHosts: []string{"ghe.corp.example"}, GitHubAPIURL: "https://ghe.corp.example/api/v3/"}, ForgeOptions{RemoteURL: "https://ghe.corp.example/acme/plans.git"}, "https://ghe.corp.example/api/v3", "https://ghe.corp.example", "acme", "", false},
		{"Actions API URL on another host ignored", Credentials{GitHubToken: "tok", GitHubHosts: []string{"ghe.corp.example"}, GitHubAPIURL: "https://evil.example/api/v3"}, ForgeOptions{RemoteURL: "https://ghe.corp.example/acme/plans.git"}, "https://ghe.corp.example/api/v3", "https://ghe.corp.example", "acme", "", false},
		{"undeclared host", gh, ForgeOptions{RemoteURL: "https://git.corp.example/acme/plans.git"}, "", "", "", "not a GitHub host", false},
		{"no token", Credentials{}, ForgeOptions{RemoteURL: "https://github.com/acme/plans.git"}, "", "", "", "no GH_TOKEN or GITHUB_TOKEN set", false},
		{"local remote", gh, ForgeOptions{RemoteURL: "/srv/plans.git"}, "", "", "", "not a known GitHub repository", false},
		{"explicit API", gh, ForgeOptions{RemoteURL: "https://git.corp.example/acme/plans.git", APIURL: "https://ghe.corp.example/api/v3"}, "https://ghe.corp.example/api/v3", "https://ghe.corp.example", "acme", "", false},
		{"explicit repo", gh, ForgeOptions{RemoteURL: "/srv/plans.git", Repo: "o/r"}, "https://api.github.com", "https://github.com", "o", "", false},
		{"explicit http API refused", gh, ForgeOptions{RemoteURL: "https://github.com/a/b", APIURL: "http://example.com"}, "", "", "", "", true},
		{"explicit API with user info refused", gh, ForgeOptions{RemoteURL: "https://github.com/a/b", APIURL: "https://u:p@example.com"}, "", "", "", "", true},
		{"loopback http API for tests", gh, ForgeOptions{RemoteURL: "https://github.com/a/b", APIURL: "http://127.0.0.1:9/"}, "http://127.0.0.1:9", "http://127.0.0.1:9", "a", "", false},
		{"bad repo flag", gh, ForgeOptions{RemoteURL: "https://github.com/a/b", Repo: "bad"}, "", "", "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, why, err := tc.creds.Forge(tc.o)
			if tc.usage {
				if !errors.Is(err, ErrBadForgeOptions) {
					t.Fatalf("err = %v, want ErrBadForgeOptions", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.why != "" {
				if g != nil || !strings.Contains(why, tc.why) {
					t.Fatalf("= %v, %q; want none because %q", g, why, tc.why)
				}
				return
			}
			if g == nil || g.api != tc.api || g.web != tc.web || g.owner != tc.owner || g.token != "tok" {
				t.Fatalf("= %+v, %q; want api %s web %s owner %s", g, why, tc.api, tc.web, tc.owner)
			}
		})
	}
}
