package main

import (
	"context"
	"fmt"
	"time"

	"github.com/planlock/planlock/gitapprove"
)

// protectionCheckTimeout bounds the branch rules lookup at start: it only warns.
const protectionCheckTimeout = 10 * time.Second

// checkProtection reads the rules of branch (the repository's default
// branch when empty) and says, one warning a line through warn, which
// protection the approval model relies on is missing. It never fails the
// command: the rules may be unreadable, and planlock still verifies every
// signature; but a merge without required review is no approval.
func checkProtection(ctx context.Context, gh *gitapprove.GitHub, branch string, warn func(string)) (gitapprove.BranchRules, error) {
	ctx, cancel := context.WithTimeout(ctx, protectionCheckTimeout)
	defer cancel()
	if branch == "" {
		b, err := gh.DefaultBranch(ctx)
		if err != nil {
			warn(fmt.Sprintf("planlock: WARNING: could not check the branch protection: %v", err))
			return gitapprove.BranchRules{}, err
		}
		branch = b
	}
	rules, err := gh.BranchRules(ctx, branch)
	if err != nil {
		warn(fmt.Sprintf("planlock: WARNING: could not read the rules of branch %s: %v", branch, err))
		return gitapprove.BranchRules{}, err
	}
	for _, w := range rules.Warnings(gitapprove.CheckName) {
		warn("planlock: WARNING: " + w + " (see planlock doctor and docs/approvals.md)")
	}
	return rules, nil
}
