package gitapprove

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/hclplan/plandiff"
)

// ApproveRequest asks for an approval pull request for one plan file.
type ApproveRequest struct {
	Repo  *Repo
	Forge Forge // nil: push only, and say how to open the PR
	// Path is the plan file's path in the repository (slash-separated).
	Path string
	// Src is the plan file's exact bytes and Plan their parse.
	Src  []byte
	Plan *hclplan.Plan
	// Base is the protected branch; the forge's (else the remote's) default when empty.
	Base string
	// Tests, when set, are the plan's test file (TestsPath, beside the
	// plan): committed on the same branch so the reviewer sees them and the
	// PR check runs them. They are not part of what is signed.
	TestsPath string
	Tests     []byte
	// AllowOtherAuthor adds the commit on top of an approval branch whose
	// last commit someone else made (refused otherwise: *OtherAuthorError).
	AllowOtherAuthor bool
}

// ApproveResult is what Approve did.
type ApproveResult struct {
	Proposed
	// AlreadyApproved is true when the base branch already holds these exact
	// bytes: there is nothing to approve and no branch was pushed.
	AlreadyApproved bool
	Body            string
}

// ApproveBranch is the branch an approval pull request comes from.
func ApproveBranch(planName string) string { return "planlock/approve/" + planName }

// Approve commits the plan on planlock/approve/<name>, pushes it and opens
// or updates the approval pull request, whose body is the plan summary and,
// when the base branch has an earlier version, what gets more or less power.
func Approve(ctx context.Context, req ApproveRequest) (ApproveResult, error) {
	if err := checkSafeName("plan name", req.Plan.Name); err != nil {
		return ApproveResult{}, err
	}
	base := req.Base
	if base == "" {
		var err error
		if req.Forge != nil {
			base, err = req.Forge.DefaultBranch(ctx)
		} else {
			base, err = req.Repo.DefaultBranch(ctx)
		}
		if err != nil {
			return ApproveResult{}, fmt.Errorf("find the base branch: %w", err)
		}
	}
	if err := req.Repo.Fetch(ctx); err != nil {
		return ApproveResult{}, err
	}
	if _, ok, err := req.Repo.RemoteBranchHash(base); err != nil {
		return ApproveResult{}, err
	} else if !ok {
		return ApproveResult{}, fmt.Errorf("base branch %q does not exist on %s", base, req.Repo.RemoteName())
	}
	approved, onBase, err := req.Repo.ReadFile(base, req.Path)
	if err != nil {
		return ApproveResult{}, err
	}
	files := map[string][]byte{req.Path: req.Src}
	testsSame := true
	if req.TestsPath != "" {
		files[req.TestsPath] = req.Tests
		old, ok, err := req.Repo.ReadFile(base, req.TestsPath)
		if err != nil {
			return ApproveResult{}, err
		}
		testsSame = ok && bytes.Equal(old, req.Tests)
	}
	if onBase && bytes.Equal(approved, req.Src) && testsSame {
		return ApproveResult{AlreadyApproved: true, Proposed: Proposed{Base: base}}, nil
	}
	body := approvalBody(req.Plan, base, req.Path, approved, onBase)
	if req.TestsPath != "" {
		body += fmt.Sprintf("\nThe plan's tests, `%s`, are in this pull request too; the PR check runs them (`planlock plan test`). They are not signed: they can change without a new approval.\n", req.TestsPath)
	}
	p, err := Propose(ctx, req.Repo, req.Forge, Proposal{
		Branch:  ApproveBranch(req.Plan.Name),
		Base:    base,
		Files:   files,
		Message: fmt.Sprintf("Approve plan %s\n\n%s\n%s", req.Plan.Name, req.Plan.Goal, req.Plan.Digest),
		Title:   "planlock: approve plan " + req.Plan.Name,
		Body:    body,
		Labels:  []string{LabelPlan},
		// Two people approving the same plan would silently stack.
		OwnTipOnly: !req.AllowOtherAuthor,
	})
	if err != nil {
		return ApproveResult{}, err
	}
	return ApproveResult{Proposed: p, Body: body}, nil
}

// approvalBody is the approval pull request's text: the summary, then the
// power diff against the version approved on base (when there is one).
func approvalBody(p *hclplan.Plan, base, path string, approved []byte, onBase bool) string {
	var b strings.Builder
	b.WriteString(hclplan.Summary(p))
	b.WriteString("\n")
	switch {
	case !onBase:
		fmt.Fprintf(&b, "## What changes\n\nThis is a new plan: %s is not on %s yet.\n", mdCode(path), mdCode(base))
	default:
		old, diags := hclplan.Parse(path, approved)
		if diags.HasErrors() {
			fmt.Fprintf(&b, "## What changes\n\nThe version on %s does not parse as a plan, so there is no comparison: review the whole plan.\n", mdCode(base))
		} else {
			b.WriteString(plandiff.Format(base, plandiff.Diff(old, p)))
		}
	}
	b.WriteString("\n---\nMerging this pull request approves the plan: CI signs the exact file bytes (`" + p.Digest + "`) and the proxy loads only signed plans.\n")
	return b.String()
}

// forgeFor picks the forge for the repository's remote: GitHub when a token
// is given and the remote is on a GitHub host (see Credentials and
// NewForge). Otherwise it returns nil and why, so the caller can tell the
// person.
func forgeFor(repo *Repo, creds Credentials) (Forge, string) {
	u, err := repo.RemoteURL()
	if err != nil {
		return nil, err.Error()
	}
	f, why, err := NewForge(creds, ForgeOptions{RemoteURL: u})
	if err != nil {
		return nil, err.Error()
	}
	return f, why
}
