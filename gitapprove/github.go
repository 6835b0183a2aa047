package gitapprove

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrNotGitHub is returned for remotes that are not on a known GitHub host.
var ErrNotGitHub = errors.New("remote is not a known GitHub repository")

// RemoteRepo is a repository on a forge host, as named by a Git remote URL.
type RemoteRepo struct {
	Host  string // e.g. github.com or ghe.example.com (without port)
	Owner string
	Name  string
}

var scpLike = regexp.MustCompile(`^(?:[^@/]+@)?([^:/]+):(.+)$`)

// ParseRemoteURL reads host, owner and repository name from an https, ssh
// or scp-like (git@host:owner/repo.git) remote URL.
func ParseRemoteURL(remote string) (RemoteRepo, error) {
	var host, p string
	if strings.Contains(remote, "://") {
		u, err := url.Parse(remote)
		if err != nil {
			return RemoteRepo{}, fmt.Errorf("remote URL %q: %w", remote, err)
		}
		if u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "ssh" && u.Scheme != "git" {
			return RemoteRepo{}, fmt.Errorf("remote URL %q: %w", remote, ErrNotGitHub)
		}
		host, p = u.Hostname(), u.Path
	} else if m := scpLike.FindStringSubmatch(remote); m != nil && !strings.HasPrefix(remote, "/") {
		host, p = m[1], m[2]
	} else {
		return RemoteRepo{}, fmt.Errorf("remote URL %q: %w", remote, ErrNotGitHub)
	}
	p = strings.TrimSuffix(strings.Trim(p, "/"), ".git")
	parts := strings.Split(p, "/")
	if host == "" || len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return RemoteRepo{}, fmt.Errorf("remote URL %q is not host/owner/repo: %w", remote, ErrNotGitHub)
	}
	return RemoteRepo{Host: strings.ToLower(host), Owner: parts[0], Name: parts[1]}, nil
}

// GitHubOptions configures a GitHub REST client.
type GitHubOptions struct {
	// APIURL is https://api.github.com or https://HOST/api/v3 (Enterprise).
	APIURL string
	// WebURL is https://github.com or https://HOST, for links shown to people.
	WebURL string
	Owner  string
	Repo   string
	Token  string
	// HTTPClient defaults to a client with a 30 s timeout.
	HTTPClient *http.Client
}

// GitHub is the Forge implementation over GitHub's REST API.
type GitHub struct {
	api, web    string
	owner, repo string
	token       string
	hc          *http.Client

	// etags remembers GET answers by URL: the next GET of the same URL is
	// conditional (If-None-Match), and GitHub's 304 for an unchanged
	// resource does not count against the rate limit.
	mu    sync.Mutex
	etags map[string]cachedGET
}

type cachedGET struct {
	etag string
	data []byte
	link string
}

// maxETags bounds the conditional-request cache (a hold's pull request and
// a few lists); past it the cache starts over.
const maxETags = 512

// NewGitHub returns a client for one repository.
func NewGitHub(o GitHubOptions) *GitHub {
	hc := o.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &GitHub{api: strings.TrimRight(o.APIURL, "/"), web: strings.TrimRight(o.WebURL, "/"), owner: o.Owner, repo: o.Repo, token: o.Token, hc: hc}
}

// gitHubEndpoints derives the API and web base URLs for the remote's host:
// github.com → api.github.com, a GHE.com tenant → api.TENANT.ghe.com, an
// Enterprise host only when the environment declares it (GITHUB_SERVER_URL
// as set by Actions, or GH_HOST as gh uses), so the token is never sent to a
// host nobody declared to be GitHub (see Credentials).
func gitHubEndpoints(rr RemoteRepo, getenv func(string) string) (api, web string, err error) {
	c := CredentialsFromEnv(getenv)
	if !c.IsGitHubHost(rr.Host) {
		return "", "", fmt.Errorf("host %s: %w (for GitHub Enterprise set GH_HOST=%s)", rr.Host, ErrNotGitHub, rr.Host)
	}
	api, web = c.endpoints(rr.Host)
	return api, web, nil
}

// APIError is a non-success answer of the GitHub API.
type APIError struct {
	Status  int `json:"-"`
	Message string
	Errors  []struct {
		Resource string `json:"resource"`
		Code     string `json:"code"`
		Message  string `json:"message"`
	}
}

func (e *APIError) Error() string {
	msg := e.Message
	for _, d := range e.Errors {
		if d.Message != "" {
			msg += ": " + d.Message
		}
	}
	return fmt.Sprintf("GitHub API: %d %s", e.Status, msg)
}

// Unwrap makes credential and server failures count as unavailable: the
// hold is kept and retried once they are fixed. (Rate limits, permission
// and validation failures are the typed errors of githuberrors.go.)
func (e *APIError) Unwrap() error {
	switch {
	case e.Status == http.StatusUnauthorized, e.Status == http.StatusTooManyRequests, e.Status >= 500:
		return ErrUnavailable
	}
	return nil
}

func (g *GitHub) repoPath() string {
	return "/repos/" + url.PathEscape(g.owner) + "/" + url.PathEscape(g.repo)
}

// do sends one request; next is the Link rel="next" URL, if any.
func (g *GitHub) do(ctx context.Context, method, u string, in, out any) (next string, err error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return "", fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	if !strings.HasPrefix(u, "http") {
		u = g.api + u
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return "", fmt.Errorf("GitHub API %s %s: %w", method, u, err)
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("User-Agent", "planlock")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if g.token != "" {
		req.Header.Set("Authorization", "Bearer "+g.token)
	}
	cacheKey := ""
	if method == http.MethodGet {
		cacheKey = req.URL.String()
		g.mu.Lock()
		if c, ok := g.etags[cacheKey]; ok {
			req.Header.Set("If-None-Match", c.etag)
		}
		g.mu.Unlock()
	}
	resp, err := g.hc.Do(req)
	if err != nil {
		return "", unavailable("GitHub API "+method+" "+req.URL.Path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return "", unavailable("GitHub API "+method+" "+req.URL.Path, err)
	}
	if resp.StatusCode == http.StatusNotModified && cacheKey != "" {
		g.mu.Lock()
		c, ok := g.etags[cacheKey]
		g.mu.Unlock()
		if ok {
			data = c.data
			resp.Header.Set("Link", c.link)
			resp.StatusCode = http.StatusOK
		}
	} else if cacheKey != "" && resp.StatusCode == http.StatusOK {
		if et := resp.Header.Get("ETag"); et != "" {
			g.mu.Lock()
			if g.etags == nil || len(g.etags) >= maxETags {
				g.etags = map[string]cachedGET{}
			}
			g.etags[cacheKey] = cachedGET{etag: et, data: data, link: resp.Header.Get("Link")}
			g.mu.Unlock()
		}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		ae := &APIError{Status: resp.StatusCode}
		if json.Unmarshal(data, ae) != nil || ae.Message == "" {
			ae.Message = http.StatusText(resp.StatusCode)
		}
		return "", fmt.Errorf("%s %s: %w", method, req.URL.Path, classify(ae, resp.Header, time.Now()))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return "", fmt.Errorf("GitHub API %s %s: decode answer: %w", method, req.URL.Path, err)
		}
	}
	return g.nextLink(resp.Header.Get("Link")), nil
}

var linkNext = regexp.MustCompile(`<([^>]+)>\s*;\s*rel="?next"?`)

// nextLink follows pagination only on the API host, so the token stays there.
func (g *GitHub) nextLink(h string) string {
	m := linkNext.FindStringSubmatch(h)
	if m == nil {
		return ""
	}
	nu, err := url.Parse(m[1])
	au, err2 := url.Parse(g.api)
	if err != nil || err2 != nil || nu.Scheme != au.Scheme || nu.Host != au.Host {
		return ""
	}
	return m[1]
}

type ghPull struct {
	Number         int     `json:"number"`
	HTMLURL        string  `json:"html_url"`
	State          string  `json:"state"`
	Merged         bool    `json:"merged"`
	MergedAt       *string `json:"merged_at"`
	MergeCommitSHA *string `json:"merge_commit_sha"`
	Head           struct {
		Ref string `json:"ref"`
		SHA string `json:"sha"`
	} `json:"head"`
	Base struct {
		Ref string `json:"ref"`
	} `json:"base"`
}

func (p ghPull) pr() PR {
	out := PR{Number: p.Number, URL: p.HTMLURL, HeadSHA: p.Head.SHA, Base: p.Base.Ref, State: PROpen}
	// List answers carry no "merged" field; merged_at is set in both.
	merged := p.Merged || p.MergedAt != nil
	switch {
	case p.State == "closed" && merged:
		out.State = PRMerged
		// For open pull requests merge_commit_sha is a test merge: ignore it.
		if p.MergeCommitSHA != nil {
			out.MergeCommit = *p.MergeCommitSHA
		}
	case p.State == "closed":
		out.State = PRClosed
	}
	return out
}

// CreateOrUpdatePR implements Forge. GitHub answers 422 "A pull request
// already exists" for a second PR from the same head: then the open one is
// found and its title and body updated.
func (g *GitHub) CreateOrUpdatePR(ctx context.Context, head, base, title, body string) (PR, error) {
	body = fitBody(body) // GitHub answers 422 for more
	var p ghPull
	_, err := g.do(ctx, http.MethodPost, g.repoPath()+"/pulls", map[string]any{"title": title, "head": head, "base": base, "body": body}, &p)
	if err == nil {
		return p.pr(), nil
	}
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusUnprocessableEntity || !strings.Contains(strings.ToLower(ae.Error()), "already exists") {
		return PR{}, fmt.Errorf("open pull request %s → %s: %w", head, base, err)
	}
	existing, ok, err := g.findPR(ctx, head, base)
	if err != nil {
		return PR{}, err
	}
	if !ok {
		return PR{}, fmt.Errorf("GitHub says a pull request for %s already exists but none is open for it", head)
	}
	var up ghPull
	if _, err := g.do(ctx, http.MethodPatch, fmt.Sprintf("%s/pulls/%d", g.repoPath(), existing.Number), map[string]any{"title": title, "body": body}, &up); err != nil {
		return PR{}, fmt.Errorf("update pull request #%d: %w", existing.Number, err)
	}
	return up.pr(), nil
}

// GetPR implements Forge.
func (g *GitHub) GetPR(ctx context.Context, number int) (PR, error) {
	var p ghPull
	if _, err := g.do(ctx, http.MethodGet, g.repoPath()+"/pulls/"+strconv.Itoa(number), nil, &p); err != nil {
		return PR{}, fmt.Errorf("read pull request #%d: %w", number, err)
	}
	return p.pr(), nil
}

// FindPR implements Forge.
func (g *GitHub) FindPR(ctx context.Context, head string) (PR, bool, error) {
	return g.findPR(ctx, head, "")
}

// findPR finds the open pull request from head (into base, when given: a
// branch may have open pull requests into several bases).
func (g *GitHub) findPR(ctx context.Context, head, base string) (PR, bool, error) {
	q := url.Values{"head": {g.owner + ":" + head}, "state": {"open"}, "per_page": {"100"}}
	u := g.repoPath() + "/pulls?" + q.Encode()
	for u != "" {
		var page []ghPull
		next, err := g.do(ctx, http.MethodGet, u, nil, &page)
		if err != nil {
			return PR{}, false, fmt.Errorf("find pull request for %s: %w", head, err)
		}
		for _, p := range page {
			if p.Head.Ref == head && (base == "" || p.Base.Ref == base) {
				return p.pr(), true, nil
			}
		}
		u = next
	}
	return PR{}, false, nil
}

// Reviews implements Forge.
func (g *GitHub) Reviews(ctx context.Context, number int) ([]Review, error) {
	u := fmt.Sprintf("%s/pulls/%d/reviews?per_page=100", g.repoPath(), number)
	var out []Review
	for u != "" {
		var page []struct {
			User *struct {
				Login string `json:"login"`
			} `json:"user"`
			State       string    `json:"state"`
			CommitID    string    `json:"commit_id"`
			SubmittedAt time.Time `json:"submitted_at"`
		}
		next, err := g.do(ctx, http.MethodGet, u, nil, &page)
		if err != nil {
			return nil, fmt.Errorf("reviews of pull request #%d: %w", number, err)
		}
		for _, r := range page {
			rv := Review{State: r.State, CommitID: r.CommitID, SubmittedAt: r.SubmittedAt}
			if r.User != nil {
				rv.User = r.User.Login
			}
			out = append(out, rv)
		}
		u = next
	}
	return out, nil
}

// DefaultBranch implements Forge.
func (g *GitHub) DefaultBranch(ctx context.Context) (string, error) {
	var r struct {
		DefaultBranch string `json:"default_branch"`
	}
	if _, err := g.do(ctx, http.MethodGet, g.repoPath(), nil, &r); err != nil {
		return "", fmt.Errorf("read repository %s/%s: %w", g.owner, g.repo, err)
	}
	return r.DefaultBranch, nil
}

// CompareURL implements Forge.
func (g *GitHub) CompareURL(head, base string) string {
	return fmt.Sprintf("%s/%s/%s/compare/%s...%s?expand=1", g.web, url.PathEscape(g.owner), url.PathEscape(g.repo), escapeBranch(base), escapeBranch(head))
}

// escapeBranch escapes a branch name for a URL path, keeping its slashes.
func escapeBranch(b string) string { return strings.ReplaceAll(url.PathEscape(b), "%2F", "/") }
