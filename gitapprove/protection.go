package gitapprove

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// BranchRules is what GitHub enforces on a branch, as far as planlock's
// threat model relies on it (GET /repos/{o}/{r}/rules/branches/{branch}).
type BranchRules struct {
	Branch            string
	PullRequest       bool // a pull request is required to change the branch
	RequiredApprovals int
	CodeOwnerReview   bool
	DismissStale      bool
	LastPushApproval  bool
	RequiredChecks    []string
	NonFastForward    bool // force pushes blocked
	Deletion          bool // deletion blocked
	RulesetIDs        []int
}

// BranchRules reads the active rules of branch.
func (g *GitHub) BranchRules(ctx context.Context, branch string) (BranchRules, error) {
	out := BranchRules{Branch: branch}
	u := g.repoPath() + "/rules/branches/" + escapeBranch(branch) + "?per_page=100"
	for u != "" {
		var page []struct {
			Type       string          `json:"type"`
			RulesetID  int             `json:"ruleset_id"`
			Parameters json.RawMessage `json:"parameters"`
		}
		next, err := g.do(ctx, http.MethodGet, u, nil, &page)
		if err != nil {
			return BranchRules{}, fmt.Errorf("rules of branch %s: %w", branch, err)
		}
		for _, r := range page {
			out.RulesetIDs = append(out.RulesetIDs, r.RulesetID)
			switch r.Type {
			case "pull_request":
				var p struct {
					Approvals    int  `json:"required_approving_review_count"`
					CodeOwners   bool `json:"require_code_owner_review"`
					DismissStale bool `json:"dismiss_stale_reviews_on_push"`
					LastPush     bool `json:"require_last_push_approval"`
				}
				if len(r.Parameters) > 0 {
					if err := json.Unmarshal(r.Parameters, &p); err != nil {
						return BranchRules{}, fmt.Errorf("rules of branch %s: pull_request parameters: %w", branch, err)
					}
				}
				// Several rulesets may apply: the strictest of each wins.
				out.PullRequest = true
				out.RequiredApprovals = max(out.RequiredApprovals, p.Approvals)
				out.CodeOwnerReview = out.CodeOwnerReview || p.CodeOwners
				out.DismissStale = out.DismissStale || p.DismissStale
				out.LastPushApproval = out.LastPushApproval || p.LastPush
			case "required_status_checks":
				var p struct {
					Checks []struct {
						Context string `json:"context"`
					} `json:"required_status_checks"`
				}
				if len(r.Parameters) > 0 && json.Unmarshal(r.Parameters, &p) == nil {
					for _, c := range p.Checks {
						out.RequiredChecks = append(out.RequiredChecks, c.Context)
					}
				}
			case "non_fast_forward":
				out.NonFastForward = true
			case "deletion":
				out.Deletion = true
			}
		}
		u = next
	}
	return out, nil
}

// Warnings says, one line each, which protection planlock relies on is
// missing: without it a merge is not a reviewed approval.
func (b BranchRules) Warnings(check string) []string {
	var w []string
	switch {
	case !b.PullRequest:
		w = append(w, fmt.Sprintf("branch %s does not require a pull request: anyone who can push approves plans alone", b.Branch))
	case b.RequiredApprovals < 1:
		w = append(w, fmt.Sprintf("branch %s requires no approving review: the author of a plan can merge (approve) it alone", b.Branch))
	}
	if !b.CodeOwnerReview {
		w = append(w, fmt.Sprintf("branch %s does not require code-owner review: any collaborator's approval approves plans and holds (see CODEOWNERS)", b.Branch))
	}
	if b.PullRequest && !b.DismissStale {
		w = append(w, fmt.Sprintf("branch %s keeps approvals after new pushes: a plan can change after it was reviewed", b.Branch))
	}
	if b.PullRequest && !b.LastPushApproval {
		w = append(w, fmt.Sprintf("branch %s does not require approval of the most recent push", b.Branch))
	}
	if check != "" && !contains(b.RequiredChecks, check) {
		w = append(w, fmt.Sprintf("branch %s does not require the %q check: a hold pull request could change more than its hold", b.Branch, check))
	}
	return w
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
