package gitapprove

import (
	"context"
	"fmt"
	"strings"
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
	// OwnTipOnly refuses to add a commit on top of a branch whose tip
	// someone else authored (ErrOtherAuthor): two people approving the
	// same plan would otherwise stack their changes without knowing.
	OwnTipOnly bool
}

// OtherAuthorError is the refusal of OwnTipOnly.
type OtherAuthorError struct {
	Branch, Commit, Author, You string
}

func (e *OtherAuthorError) Error() string {
	return fmt.Sprintf("branch %s ends in commit %s by %s, not by you (%s): your change would be stacked on theirs; coordinate with them, or run again with --allow-other-author to add it on top",
		e.Branch, e.Commit, e.Author, e.You)
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
	// Restarted says why the branch was started again from Base ("" when
	// it was not).
	Restarted string
}

// startAgain tells whether the existing branch is done with: its pull
// request was merged or closed (with a forge), or (Git alone) its tip is
// already in Base or Base already holds the branch's version of every file
// (a squash or rebase merge). Building on such a branch would propose old
// commits again and conflict with Base.
func startAgain(ctx context.Context, repo *Repo, forge Forge, p Proposal) (bool, string, error) {
	tip, ok, err := repo.RemoteBranchHash(p.Branch)
	if err != nil || !ok {
		return false, "", err
	}
	base, ok, err := repo.RemoteBranchHash(p.Base)
	if err != nil || !ok {
		return false, "", err
	}
	if forge != nil {
		if _, open, err := forge.FindPR(ctx, p.Branch); err != nil {
			return false, "", err
		} else if !open {
			return true, "its earlier pull request was merged or closed", nil
		}
		return false, "", nil
	}
	if in, err := repo.IsAncestor(tip, base); err != nil {
		return false, "", err
	} else if in {
		return true, "it was merged into " + p.Base, nil
	}
	tipFiles, err := repo.changedFiles(tip, base)
	if err != nil {
		return false, "", err
	}
	if tipFiles {
		return true, p.Base + " already holds its files (squash or rebase merge)", nil
	}
	return false, "", nil
}

// checkOwnTip refuses a branch whose last commit someone else authored.
func checkOwnTip(repo *Repo, branch string) error {
	tip, ok, err := repo.RemoteBranchHash(branch)
	if err != nil || !ok {
		return err
	}
	them, err := repo.CommitAuthor(tip)
	if err != nil {
		return err
	}
	me, err := repo.Author()
	if err != nil {
		return err
	}
	if strings.EqualFold(them.Email, me.Email) {
		return nil
	}
	return &OtherAuthorError{Branch: branch, Commit: tip.String()[:12],
		Author: fmt.Sprintf("%s <%s>", them.Name, them.Email), You: fmt.Sprintf("%s <%s>", me.Name, me.Email)}
}

// Propose fetches, commits the files on the branch (from Base when new),
// pushes, and opens or updates the pull request. Running it again with the
// same files changes nothing but the PR's title and body. Without a forge
// the branch is still pushed and Next says how to open the PR by hand.
func Propose(ctx context.Context, repo *Repo, forge Forge, p Proposal) (Proposed, error) {
	if err := repo.Fetch(ctx); err != nil {
		return Proposed{}, err
	}
	fresh, why, err := startAgain(ctx, repo, forge, p)
	if err != nil {
		return Proposed{}, err
	}
	if !fresh && p.OwnTipOnly {
		if err := checkOwnTip(repo, p.Branch); err != nil {
			return Proposed{}, err
		}
	}
	res, err := repo.CommitFiles(CommitRequest{Branch: p.Branch, Base: p.Base, Files: p.Files, Message: p.Message, FromBase: fresh})
	if err != nil {
		return Proposed{}, err
	}
	push := repo.Push
	if fresh {
		push = repo.PushForce
	}
	if err := push(ctx, p.Branch, res.Commit); err != nil {
		return Proposed{}, err
	}
	out := Proposed{Branch: p.Branch, Base: p.Base, Changed: res.Changed || fresh, Restarted: why}
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
