package gitapprove

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/http"
)

// Credentials are the tokens planlock may send, and the rule for where each
// one goes. Every Git transport (Repo) and every forge client (Forge) gets
// its token from here, so the rule is written once:
//
//   - a token travels over https only, never http, ssh or a local path;
//   - GitHubToken goes only to GitHub hosts: github.com (and api.github.com),
//     GHE.com tenants (*.ghe.com and their api. host), and the hosts the
//     operator declares (GH_HOST, the host of GITHUB_SERVER_URL, an explicit
//     --github-api);
//   - any other https Git host gets GitToken (PLANLOCK_GIT_TOKEN) or nothing.
type Credentials struct {
	// GitHubToken is GH_TOKEN, else GITHUB_TOKEN (gh's order).
	GitHubToken string
	// GitToken is PLANLOCK_GIT_TOKEN: basic auth for https Git hosts that
	// are not GitHub.
	GitToken string
	// GitHubHosts are hosts declared to be GitHub besides github.com and
	// *.ghe.com (lower case, without port).
	GitHubHosts []string
	// GitHubAPIURL is GITHUB_API_URL (set by Actions); used for a declared
	// host only when it is https on that same host.
	GitHubAPIURL string
}

// CredentialsFromEnv reads the tokens and the declared GitHub hosts through
// getenv, so callers decide where the environment comes from.
func CredentialsFromEnv(getenv func(string) string) Credentials {
	c := Credentials{GitHubToken: tokenFromEnv(getenv), GitToken: getenv("PLANLOCK_GIT_TOKEN"), GitHubAPIURL: getenv("GITHUB_API_URL")}
	if h := strings.TrimSpace(getenv("GH_HOST")); h != "" {
		c.GitHubHosts = append(c.GitHubHosts, strings.ToLower(h))
	}
	if s := getenv("GITHUB_SERVER_URL"); s != "" {
		if u, err := url.Parse(s); err == nil && u.Hostname() != "" {
			c.GitHubHosts = append(c.GitHubHosts, strings.ToLower(u.Hostname()))
		}
	}
	return c
}

// tokenFromEnv returns GH_TOKEN, else GITHUB_TOKEN, as gh does.
func tokenFromEnv(getenv func(string) string) string {
	if t := getenv("GH_TOKEN"); t != "" {
		return t
	}
	return getenv("GITHUB_TOKEN")
}

// IsGitHubHost reports whether host may receive the GitHub token.
func (c Credentials) IsGitHubHost(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	switch {
	case host == "":
		return false
	case host == "github.com", host == "www.github.com", host == "api.github.com":
		return true
	case isGHECom(host):
		return true
	}
	for _, h := range c.GitHubHosts {
		if host == h {
			return true
		}
	}
	return false
}

// isGHECom matches a GHE.com tenant (acme.ghe.com) and its API host
// (api.acme.ghe.com); nothing deeper, nothing else.
func isGHECom(host string) bool {
	rest, ok := strings.CutSuffix(host, ".ghe.com")
	if !ok || rest == "" {
		return false
	}
	rest = strings.TrimPrefix(rest, "api.")
	return rest != "" && !strings.Contains(rest, ".")
}

// GitAuth is the basic auth for a Git remote URL, nil for none (ssh remotes
// use the ssh agent, local paths need nothing).
func (c Credentials) GitAuth(remote string) (transport.AuthMethod, error) {
	ep, err := transport.NewEndpoint(remote)
	if err != nil {
		return nil, fmt.Errorf("remote URL %q: %w", redact(remote), err)
	}
	if ep.Protocol != "https" {
		return nil, nil
	}
	tok := c.GitToken
	if c.IsGitHubHost(ep.Host) {
		tok = c.GitHubToken
	}
	if tok == "" {
		return nil, nil
	}
	return &http.BasicAuth{Username: "x-access-token", Password: tok}, nil
}

// redact drops user information from a URL for messages.
func redact(u string) string {
	if p, err := url.Parse(u); err == nil && p.User != nil {
		p.User = nil
		return p.String()
	}
	return u
}

// ForgeOptions says which GitHub repository a forge client talks to.
type ForgeOptions struct {
	// RemoteURL is the Git remote; host, owner and name come from it unless
	// given below.
	RemoteURL string
	// APIURL overrides the API base (e.g. https://ghe.example.com/api/v3).
	// It must be https (http only on a loopback address, for tests): the
	// token is sent there, and giving it declares its host GitHub.
	APIURL string
	// Repo overrides OWNER/REPO.
	Repo string
}

// ErrBadForgeOptions marks a usage error in ForgeOptions (a bad --github-api
// or --github-repo).
var ErrBadForgeOptions = errors.New("bad GitHub options")

// NewForge is the forge planlock opens pull requests with for a plans
// repository (approve, the proxy's hold pull requests, doctor): the GitHub
// client, or a nil Forge and why Git alone is used (no token, or a remote
// that is not on a GitHub host). An explicit o.APIURL declares its host
// GitHub (WithGitHubAPI). Errors wrap ErrBadForgeOptions: they are the
// caller's usage errors, found before any request is sent.
func NewForge(c Credentials, o ForgeOptions) (Forge, string, error) {
	gh, why, err := c.WithGitHubAPI(o.APIURL).Forge(o)
	if err != nil || gh == nil {
		return nil, why, err
	}
	return gh, "", nil
}

// Forge is the GitHub client for o, or nil with the reason when there is
// none (no token, or a remote that is not on a GitHub host): then planlock
// uses Git alone. Errors wrap ErrBadForgeOptions.
//
// The token is only ever sent over https: a remote on a GitHub host given
// as plain http is refused (its pushes could not carry the token either),
// and the API URL the client gets is checked to be https (plain http only
// on a loopback address, for tests) whatever it was derived from.
func (c Credentials) Forge(o ForgeOptions) (*GitHub, string, error) {
	if c.GitHubToken == "" {
		return nil, "no GH_TOKEN or GITHUB_TOKEN set", nil
	}
	if u, err := url.Parse(o.RemoteURL); err == nil && u.Scheme == "http" && c.IsGitHubHost(u.Hostname()) {
		return nil, "", fmt.Errorf("%w: remote %s is plain http: the GitHub token is only ever sent over https; use the remote's https URL", ErrBadForgeOptions, redact(o.RemoteURL))
	}
	gh, why, err := c.forge(o)
	if err != nil || gh == nil {
		return gh, why, err
	}
	if u, err := url.Parse(gh.api); err != nil || !(u.Scheme == "https" || u.Scheme == "http" && isLoopback(u.Hostname())) {
		return nil, "", fmt.Errorf("%w: GitHub API %q is not https: the token is only ever sent over https", ErrBadForgeOptions, redact(gh.api))
	}
	return gh, "", nil
}

func (c Credentials) forge(o ForgeOptions) (*GitHub, string, error) {
	if o.APIURL == "" && o.Repo == "" {
		rr, err := ParseRemoteURL(o.RemoteURL)
		if err != nil {
			return nil, "the remote is not a known GitHub repository", nil
		}
		if !c.IsGitHubHost(rr.Host) {
			return nil, fmt.Sprintf("the remote's host %s is not a GitHub host (set GH_HOST=%s if it is GitHub Enterprise)", rr.Host, rr.Host), nil
		}
		api, web := c.endpoints(rr.Host)
		return NewGitHub(GitHubOptions{APIURL: api, WebURL: web, Owner: rr.Owner, Repo: rr.Name, Token: c.GitHubToken}), "", nil
	}
	owner, name, ok := strings.Cut(o.Repo, "/")
	if o.Repo == "" {
		rr, err := ParseRemoteURL(o.RemoteURL)
		if err != nil {
			return nil, "", fmt.Errorf("%w: %v: give --github-repo OWNER/REPO", ErrBadForgeOptions, err)
		}
		owner, name, ok = rr.Owner, rr.Name, true
	}
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return nil, "", fmt.Errorf("%w: --github-repo wants OWNER/REPO, not %q", ErrBadForgeOptions, o.Repo)
	}
	api := strings.TrimRight(o.APIURL, "/")
	if api == "" {
		api = "https://api.github.com"
	}
	u, err := url.Parse(api)
	if err != nil || u.Host == "" || u.User != nil || !(u.Scheme == "https" || u.Scheme == "http" && isLoopback(u.Hostname())) {
		return nil, "", fmt.Errorf("%w: --github-api must be an https URL (the token is sent there), not %q", ErrBadForgeOptions, redact(o.APIURL))
	}
	web := strings.TrimSuffix(api, "/api/v3")
	if web == "https://api.github.com" {
		web = "https://github.com"
	}
	return NewGitHub(GitHubOptions{APIURL: api, WebURL: web, Owner: owner, Repo: name, Token: c.GitHubToken}), "", nil
}

// WithGitHubAPI declares the host of an explicit API URL (and, for an
// Enterprise /api/v3 URL, the same host's Git) to be GitHub.
func (c Credentials) WithGitHubAPI(api string) Credentials {
	if u, err := url.Parse(api); err == nil && u.Scheme == "https" && u.Hostname() != "" {
		c.GitHubHosts = append(append([]string(nil), c.GitHubHosts...), strings.ToLower(u.Hostname()))
	}
	return c
}

func isLoopback(h string) bool { return h == "localhost" || h == "127.0.0.1" || h == "::1" }

// endpoints gives the API and web base URLs of a GitHub host.
func (c Credentials) endpoints(host string) (api, web string) {
	switch {
	case host == "github.com" || host == "www.github.com":
		return "https://api.github.com", "https://github.com"
	case isGHECom(host):
		tenant := strings.TrimPrefix(host, "api.")
		return "https://api." + tenant, "https://" + tenant
	}
	if u, err := url.Parse(c.GitHubAPIURL); err == nil && c.GitHubAPIURL != "" && u.Scheme == "https" && strings.EqualFold(u.Hostname(), host) {
		return strings.TrimRight(c.GitHubAPIURL, "/"), "https://" + host
	}
	return "https://" + host + "/api/v3", "https://" + host
}
