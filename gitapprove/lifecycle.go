package gitapprove

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
)

// Labels planlock puts on its pull requests.
const (
	LabelPlan = "planlock:plan" // approval pull requests
	LabelHold = "planlock:hold" // hold pull requests
)

// Lifecycle is what a forge does beyond Forge to keep planlock's pull
// requests readable: labels, comments, closing. *GitHub has it.
type Lifecycle interface {
	AddLabels(ctx context.Context, number int, labels ...string) error
	Comment(ctx context.Context, number int, body string) error
	ClosePR(ctx context.Context, number int) error
}

// AddLabels implements Lifecycle (GitHub creates a label that does not exist).
func (g *GitHub) AddLabels(ctx context.Context, number int, labels ...string) error {
	if _, err := g.do(ctx, http.MethodPost, fmt.Sprintf("%s/issues/%d/labels", g.repoPath(), number), map[string]any{"labels": labels}, nil); err != nil {
		return fmt.Errorf("label pull request #%d: %w", number, err)
	}
	return nil
}

// Comment implements Lifecycle.
func (g *GitHub) Comment(ctx context.Context, number int, body string) error {
	if _, err := g.do(ctx, http.MethodPost, fmt.Sprintf("%s/issues/%d/comments", g.repoPath(), number), map[string]any{"body": fitBody(body)}, nil); err != nil {
		return fmt.Errorf("comment on pull request #%d: %w", number, err)
	}
	return nil
}

// ClosePR implements Lifecycle.
func (g *GitHub) ClosePR(ctx context.Context, number int) error {
	if _, err := g.do(ctx, http.MethodPatch, fmt.Sprintf("%s/pulls/%d", g.repoPath(), number), map[string]any{"state": "closed"}, nil); err != nil {
		return fmt.Errorf("close pull request #%d: %w", number, err)
	}
	return nil
}

// DeleteBranch deletes the remote's branch; a branch that is not there
// (as of a fetch now) is not an error.
func (r *Repo) DeleteBranch(ctx context.Context, branch string) error {
	if err := r.Fetch(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok, err := r.remoteBranchHash(branch); err != nil || !ok {
		return err
	}
	auth, err := r.auth()
	if err != nil {
		return err
	}
	spec := config.RefSpec(":" + plumbing.NewBranchReferenceName(branch).String())
	err = r.repo.PushContext(ctx, &git.PushOptions{RemoteName: r.remote, RefSpecs: []config.RefSpec{spec}, Auth: auth, CABundle: r.caPEM})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return unavailable("delete branch "+branch+" on "+r.remote, err)
	}
	_ = r.repo.Storer.RemoveReference(r.remoteRef(branch))
	return nil
}

// Ran comments on the hold's pull request that the held call ran: its
// audit record and the upstream's result. Nothing without a forge.
func (h *Holds) Ran(ctx context.Context, hold *HoldRequest, prNumber int, auditSeq uint64, status string) error {
	lc, ok := h.Forge.(Lifecycle)
	if !ok || prNumber <= 0 {
		return nil
	}
	body := fmt.Sprintf("planlock ran the approved call of hold %s once: audit record #%s, result %s.\n\nThe approval is used up; the same call again needs a new approval.",
		mdCode(hold.ID), strconv.FormatUint(auditSeq, 10), mdCode(status))
	return lc.Comment(ctx, prNumber, body)
}

// Retire ends a hold that can no longer run (expired, superseded): its pull
// request, when still open, gets a comment saying why and is closed, and
// its branch is deleted. Safe to repeat.
func (h *Holds) Retire(ctx context.Context, hold *HoldRequest, prNumber int, why string) error {
	var errs []error
	if lc, ok := h.Forge.(Lifecycle); ok && prNumber > 0 {
		pr, err := h.Forge.GetPR(ctx, prNumber)
		switch {
		case err != nil:
			errs = append(errs, err)
		case pr.State == PROpen:
			if err := lc.Comment(ctx, prNumber, fmt.Sprintf("planlock closed this pull request: hold %s %s. Merging it would approve nothing; the agent has to ask again.", mdCode(hold.ID), strings.TrimSuffix(why, "."))); err != nil {
				errs = append(errs, err)
			} else if err := lc.ClosePR(ctx, prNumber); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := h.Repo.DeleteBranch(ctx, hold.Branch()); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Reopen carries a pull request that a person reopened after planlock had
// recorded its hold (old) as refused over to hold, a new hold for the same
// call: on the same branch old's file is replaced by hold's, the title and
// body are updated and a comment says so. Merging the pull request then
// approves hold, once, as for any hold.
func (h *Holds) Reopen(ctx context.Context, old, hold *HoldRequest, prNumber int, pin *PinChange) (HoldPR, error) {
	pr, err := h.open(ctx, hold, pin, old.Branch(), old)
	if err != nil {
		return HoldPR{}, err
	}
	if lc, ok := h.Forge.(Lifecycle); ok && prNumber > 0 {
		msg := fmt.Sprintf("This pull request was reopened after planlock had recorded hold %s as refused (it was closed). It now asks for the same call again as hold %s: merging it approves that call once, until %s.",
			mdCode(old.ID), mdCode(hold.ID), hold.Expires.UTC().Format("2006-01-02T15:04:05Z"))
		if err := lc.Comment(ctx, prNumber, msg); err != nil {
			pr.Warning = err.Error()
		}
	}
	return pr, nil
}
