package gitapprove

import (
	"context"
	"fmt"
)

// Proposal is a set of files to put in front of reviewers as a pull request.
type Proposal struct {
	Branch  string
	Base    string
	Files   map[string][]byte
	Message string // commit message
	Title   string // pull request title
	Body    string // pull request body (markdown)
	// Labels are put on the pull request when the forge has Lifecycle.
	Labels []string
}

// Proposed is what Propose did.
type Proposed struct {
	Branch string
	Base   string
	// Changed is false when the branch already held these files.
	Changed bool
	// PR is set when a forge was available.
	PR *PR
	// Next tells a person what to do when no pull request could be opened.
	Next string
	// Warning says what went wrong after the pull request was opened
	// (labelling); the pull request is there regardless.
	Warning string
}

// Propose fetches, commits the files on the branch (from Base when new),
// pushes, and opens or updates the pull request. Running it again with the
// same files changes nothing but the PR's title and body. Without a forge
// the branch is still pushed and Next says how to open the PR by hand.
func Propose(ctx context.Context, repo *Repo, forge Forge, p Proposal) (Proposed, error) {
	if err := repo.Fetch(ctx); err != nil {
		return Proposed{}, err
	}
	res, err := repo.CommitFiles(CommitRequest{Branch: p.Branch, Base: p.Base, Files: p.Files, Message: p.Message})
	if err != nil {
		return Proposed{}, err
	}
	if err := repo.Push(ctx, p.Branch, res.Commit); err != nil {
		return Proposed{}, err
	}
	out := Proposed{Branch: p.Branch, Base: p.Base, Changed: res.Changed}
	if forge == nil {
		out.Next = fmt.Sprintf("pushed branch %s to %s; open a pull request from it into %s", p.Branch, repo.RemoteName(), p.Base)
		if u, err := repo.RemoteURL(); err == nil {
			if rr, err := ParseRemoteURL(u); err == nil && rr.Host == "github.com" {
				gh := NewGitHub(GitHubOptions{WebURL: "https://github.com", Owner: rr.Owner, Repo: rr.Name})
				out.Next += ": " + gh.CompareURL(p.Branch, p.Base) + " (or set GITHUB_TOKEN and run again to open it automatically)"
			}
		}
		return out, nil
	}
	pr, err := forge.CreateOrUpdatePR(ctx, p.Branch, p.Base, p.Title, p.Body)
	if err != nil {
		return out, fmt.Errorf("pushed branch %s, but: %w", p.Branch, err)
	}
	out.PR = &pr
	if lc, ok := forge.(Lifecycle); ok && len(p.Labels) > 0 && pr.State == PROpen {
		if err := lc.AddLabels(ctx, pr.Number, p.Labels...); err != nil {
			out.Warning = err.Error()
		}
	}
	return out, nil
}
