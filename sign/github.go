package sign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// Getenv looks up an environment variable (os.Getenv in production, a map in tests).
type Getenv func(string) string

// IDToken returns the OIDC token for keyless signing: $SIGSTORE_ID_TOKEN when
// set, else a GitHub Actions token for audience "sigstore" requested from
// $ACTIONS_ID_TOKEN_REQUEST_URL with $ACTIONS_ID_TOKEN_REQUEST_TOKEN. It
// returns "" and no error when neither is available.
func IDToken(ctx context.Context, getenv Getenv, client *http.Client) (string, error) {
	if tok := strings.TrimSpace(getenv("SIGSTORE_ID_TOKEN")); tok != "" {
		return tok, nil
	}
	reqURL, reqTok := getenv("ACTIONS_ID_TOKEN_REQUEST_URL"), getenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN")
	if reqURL == "" || reqTok == "" {
		return "", nil
	}
	u, err := url.Parse(reqURL)
	if err != nil {
		return "", fmt.Errorf("ACTIONS_ID_TOKEN_REQUEST_URL: %w", err)
	}
	q := u.Query()
	q.Set("audience", "sigstore")
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", fmt.Errorf("GitHub OIDC token request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+reqTok)
	req.Header.Set("Accept", "application/json")
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("GitHub OIDC token request: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("GitHub OIDC token response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GitHub OIDC token request: HTTP %d (does the job have permissions: id-token: write?)", resp.StatusCode)
	}
	var out struct {
		Value string `json:"value"`
	}
	if err := json.Unmarshal(body, &out); err != nil || out.Value == "" {
		return "", errors.New("GitHub OIDC token response has no token")
	}
	return out.Value, nil
}

// mergeMessage finds the pull request number in GitHub's merge commit message.
var mergeMessage = regexp.MustCompile(`(?:^Merge pull request #(\d+) |\(#(\d+)\)\s*$)`)

// PredicateFromGitHub fills what GitHub Actions knows about the approval:
// repository, ref, merge commit, pull request number and who merged it, from
// $GITHUB_REPOSITORY, $GITHUB_REF, $GITHUB_SHA and the event payload at
// $GITHUB_EVENT_PATH (pull_request "closed" with merged, or push). Outside
// Actions it returns an empty predicate.
func PredicateFromGitHub(getenv Getenv, readFile func(string) ([]byte, error)) (Predicate, error) {
	var p Predicate
	if getenv("GITHUB_ACTIONS") != "true" && getenv("GITHUB_REPOSITORY") == "" {
		return p, nil
	}
	p.Repository = getenv("GITHUB_REPOSITORY")
	p.Ref = getenv("GITHUB_REF")
	p.Commit = getenv("GITHUB_SHA")
	path := getenv("GITHUB_EVENT_PATH")
	if path == "" {
		return p, nil
	}
	if readFile == nil {
		readFile = os.ReadFile
	}
	data, err := readFile(path)
	if err != nil {
		return p, fmt.Errorf("GitHub event payload: %w", err)
	}
	var ev struct {
		PullRequest *struct {
			Number         int    `json:"number"`
			Merged         bool   `json:"merged"`
			MergeCommitSHA string `json:"merge_commit_sha"`
			Base           struct {
				Ref string `json:"ref"`
			} `json:"base"`
			MergedBy *struct {
				Login string `json:"login"`
			} `json:"merged_by"`
		} `json:"pull_request"`
		After      string `json:"after"`
		HeadCommit *struct {
			Message string `json:"message"`
		} `json:"head_commit"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return p, fmt.Errorf("GitHub event payload %s: %w", path, err)
	}
	switch {
	case ev.PullRequest != nil:
		// On pull_request events GITHUB_REF is refs/pull/N/merge; the approval
		// is for the branch the pull request was merged into.
		p.PullRequest = ev.PullRequest.Number
		if ev.PullRequest.Base.Ref != "" {
			p.Ref = "refs/heads/" + ev.PullRequest.Base.Ref
		}
		if ev.PullRequest.MergeCommitSHA != "" {
			p.Commit = ev.PullRequest.MergeCommitSHA
		}
		if ev.PullRequest.MergedBy != nil && ev.PullRequest.MergedBy.Login != "" {
			p.Approvers = []string{ev.PullRequest.MergedBy.Login}
		}
	case ev.HeadCommit != nil:
		if ev.After != "" {
			p.Commit = ev.After
		}
		if m := mergeMessage.FindStringSubmatch(firstLine(ev.HeadCommit.Message)); m != nil {
			n := m[1]
			if n == "" {
				n = m[2]
			}
			p.PullRequest, _ = strconv.Atoi(n)
		}
	}
	return p, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
