package gitapprove

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
)

// MergedPR finds the merged pull request whose merge brought commit sha
// (GET /repos/{o}/{r}/commits/{sha}/pulls); ok=false when the commit came
// without one (a direct push).
func (g *GitHub) MergedPR(ctx context.Context, sha string) (PR, bool, error) {
	u := g.repoPath() + "/commits/" + url.PathEscape(sha) + "/pulls?per_page=100"
	var found *PR
	for u != "" {
		var page []ghPull
		next, err := g.do(ctx, http.MethodGet, u, nil, &page)
		if err != nil {
			return PR{}, false, fmt.Errorf("pull requests of commit %s: %w", sha, err)
		}
		for _, p := range page {
			pr := p.pr()
			if pr.State != PRMerged {
				continue
			}
			// The pull request this commit is the merge of wins over one
			// that merely contained it (a branch merged into another).
			if strings.EqualFold(pr.MergeCommit, sha) {
				return pr, true, nil
			}
			if found == nil {
				found = &pr
			}
		}
		u = next
	}
	if found == nil {
		return PR{}, false, nil
	}
	return *found, true, nil
}

// Approvers are the logins whose latest review of pull request number is an
// approval, sorted: GitHub's own rule, where a later "changes requested" or
// a dismissal replaces an approval and a mere comment changes nothing.
func (g *GitHub) Approvers(ctx context.Context, number int) ([]string, error) {
	reviews, err := g.Reviews(ctx, number)
	if err != nil {
		return nil, err
	}
	return latestApprovers(reviews), nil
}

// latestApprovers applies that rule to reviews listed oldest first.
func latestApprovers(reviews []Review) []string {
	latest := map[string]string{}
	for _, r := range reviews {
		if r.User == "" {
			continue
		}
		switch r.State {
		case "APPROVED", "CHANGES_REQUESTED", "DISMISSED":
			latest[r.User] = r.State
		}
	}
	var out []string
	for u, s := range latest {
		if s == "APPROVED" {
			out = append(out, u)
		}
	}
	sort.Strings(out)
	return out
}

// Slug is "owner/repo".
func (g *GitHub) Slug() string { return g.owner + "/" + g.repo }
