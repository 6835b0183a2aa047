package githubtest

import (
	"net/http"
	"strings"
)

// The endpoints the signing workflow and planlock's protection checks use,
// as docs.github.com/rest documents them:
//
//   - GET /repos/{owner}/{repo}/commits/{sha}/pulls   200 list of the pull requests
//     associated with the commit: merged ones whose merge commit it is, open
//     ones whose head it is (list items: no "merged" field)
//   - GET /repos/{owner}/{repo}/rules/branches/{branch} 200 list of the active
//     rules for the branch, each {"type", "ruleset_source_type", "ruleset_source",
//     "ruleset_id", "parameters"?}; [] when none apply (never 404 for a branch
//     without rules)

// SetBranchRules sets the rules GitHub reports as active on branch, each in
// the shape of GET /repos/{owner}/{repo}/rules/branches/{branch}; see
// PullRequestRule.
func (f *Server) SetBranchRules(branch string, rules ...map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rules == nil {
		f.rules = map[string][]map[string]any{}
	}
	f.rules[branch] = rules
}

// PullRequestRule is a "pull_request" rule with GitHub's parameters.
func PullRequestRule(approvals int, codeOwners, dismissStale, lastPush bool) map[string]any {
	return map[string]any{
		"type": "pull_request", "ruleset_source_type": "Repository", "ruleset_source": "acme/plans", "ruleset_id": 42,
		"parameters": map[string]any{
			"required_approving_review_count":   approvals,
			"require_code_owner_review":         codeOwners,
			"dismiss_stale_reviews_on_push":     dismissStale,
			"require_last_push_approval":        lastPush,
			"required_review_thread_resolution": false,
			"allowed_merge_methods":             []string{"merge", "squash", "rebase"},
		},
	}
}

// SimpleRule is a rule without parameters, e.g. "deletion" or "non_fast_forward".
func SimpleRule(typ string) map[string]any {
	return map[string]any{"type": typ, "ruleset_source_type": "Repository", "ruleset_source": "acme/plans", "ruleset_id": 42}
}

// serveApprovals answers the endpoints above; false when r is not one of them.
func (f *Server) serveApprovals(w http.ResponseWriter, r *http.Request, rest string) bool {
	if r.Method != http.MethodGet {
		return false
	}
	switch {
	case strings.HasPrefix(rest, "/commits/") && strings.HasSuffix(rest, "/pulls"):
		sha := strings.TrimSuffix(strings.TrimPrefix(rest, "/commits/"), "/pulls")
		if len(sha) < 7 || strings.Contains(sha, "/") {
			f.fail(w, http.StatusUnprocessableEntity, "No commit found for SHA: "+sha, "/commits/commits#list-pull-requests-associated-with-a-commit")
			return true
		}
		var out []map[string]any
		for _, p := range f.pulls {
			if p.Merged && strings.HasPrefix(p.MergeSHA, sha) || p.State == "open" && strings.HasPrefix(p.HeadSHA, sha) {
				out = append(out, f.pullJSON(p, false))
			}
		}
		f.page(w, r, rest, out)
		return true
	case strings.HasPrefix(rest, "/rules/branches/"):
		branch := strings.TrimPrefix(rest, "/rules/branches/")
		out := []map[string]any{}
		out = append(out, f.rules[branch]...)
		f.page(w, r, rest, out)
		return true
	}
	return false
}
