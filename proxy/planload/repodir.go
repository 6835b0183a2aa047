package planload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/sign"
)

// RepoDirSync keeps a local copy of every plan in one directory of a Git
// repository (GitOps for planlock serve): the plans (*.hcl directly in Dir)
// from the default branch, each with its bundle from the approvals branch,
// copied into Local, where the gateway loads them as from any plans
// directory. Like RepoSync it only transports and verifies nothing: each
// copied plan is loaded with every rule of a load before it is served.
//
// A plan whose bundle is missing or names other bytes (not signed yet) is
// not copied; its earlier copy, if any, stays, so the plan verified before
// keeps serving. A plan no longer on the branch is removed from Local, so
// the gateway stops serving it.
type RepoDirSync struct {
	// OpenRepo makes the local clone on first use (and again after it failed).
	OpenRepo func(ctx context.Context) (*gitapprove.Repo, error)
	Repo     *gitapprove.Repo
	// Dir is the plans directory's path in the repository (slash-separated).
	Dir string
	// Branch is where the plans are read; the remote's default branch when empty.
	Branch string
	// Approvals is the branch with the bundles; gitapprove.DefaultApprovalsBranch when empty.
	Approvals string
	// Local receives the copies.
	Local string
	// Log receives one line per event; nil discards.
	Log func(string)

	last struct {
		branch           string
		plans, approvals string
	}
	report   syncReport
	skipping map[string]string // plan file → why it is not copied, logged once
}

func (s *RepoDirSync) log(m string) {
	if s.Log != nil {
		s.Log(m)
	}
}

// Sync asks the remote for the branch tips (one ls-remote) and, when one
// moved, fetches and brings Local in line with the branch. It reports
// whether Local changed. On any error Local stays as it was.
func (s *RepoDirSync) Sync(ctx context.Context) (bool, error) {
	if s.Repo == nil {
		if s.OpenRepo == nil {
			return false, fmt.Errorf("no plans repository")
		}
		r, err := s.OpenRepo(ctx)
		if err != nil {
			return false, fmt.Errorf("clone the plans repository: %w", err)
		}
		s.Repo = r
	}
	heads, err := s.Repo.LsRemote(ctx)
	if err != nil {
		return false, fmt.Errorf("look up the plans repository: %w", err)
	}
	branch := s.Branch
	if branch == "" {
		branch = heads.Head
	}
	if branch == "" {
		return false, fmt.Errorf("the plans repository has no default branch (HEAD); give the branch")
	}
	planTip, ok := heads.Branches[branch]
	if !ok {
		return false, fmt.Errorf("the plans repository has no branch %q", branch)
	}
	approvals := s.Approvals
	if approvals == "" {
		approvals = gitapprove.DefaultApprovalsBranch
	}
	apprTip, ok := heads.Branches[approvals]
	if !ok {
		return false, fmt.Errorf("the plans repository has no approvals branch %q (CI publishes the signatures there)", approvals)
	}
	if s.last.branch == branch && s.last.plans == planTip.String() && s.last.approvals == apprTip.String() {
		return false, nil
	}
	// Only the two branches read: whatever is pushed to another branch
	// (unreviewed work) never reaches this copy.
	if err := s.Repo.FetchBranches(ctx, branch, approvals); err != nil {
		return false, fmt.Errorf("fetch the plans repository: %w", err)
	}
	names, err := s.Repo.ListFilesAt(planTip, s.Dir)
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(s.Local, 0o700); err != nil {
		return false, fmt.Errorf("plans copy: %w", err)
	}
	if s.skipping == nil {
		s.skipping = map[string]string{}
	}
	changed := false
	var onBranch []string
	for _, name := range names {
		if !strings.HasSuffix(name, ".hcl") || strings.HasSuffix(name, "_test.hcl") || strings.HasPrefix(name, ".") {
			continue
		}
		onBranch = append(onBranch, name)
		p := path.Join(s.Dir, name)
		plan, _, err := s.Repo.ReadFileAt(planTip, p)
		if err != nil {
			return changed, err
		}
		bundle, ok, err := s.Repo.ReadFileAt(apprTip, p+gitapprove.BundleSuffix)
		if err != nil {
			return changed, err
		}
		sum := sha256.Sum256(plan)
		why := ""
		switch {
		case !ok:
			why = fmt.Sprintf("%s at %s@%s has no signature bundle on %s yet", p, branch, short(planTip), approvals)
		case !bundleNames(bundle, hex.EncodeToString(sum[:])):
			why = fmt.Sprintf("%s at %s@%s has no signature for these bytes on %s@%s (not signed yet, or not approved)", p, branch, short(planTip), approvals, short(apprTip))
		}
		if why != "" {
			if s.skipping[name] != why {
				s.skipping[name] = why
				s.log("planlock: plans repository: " + why + "; not copied (an earlier copy keeps serving)")
			}
			continue
		}
		delete(s.skipping, name)
		c, err := writePair(filepath.Join(s.Local, name), plan, bundle)
		if err != nil {
			return changed, err
		}
		if c {
			changed = true
			s.log(fmt.Sprintf("planlock: fetched %s from %s@%s with its bundle from %s@%s", p, branch, short(planTip), approvals, short(apprTip)))
		}
	}
	// Plans gone from the branch are removed from the copy.
	local, err := os.ReadDir(s.Local)
	if err != nil {
		return changed, fmt.Errorf("plans copy: %w", err)
	}
	for _, e := range local {
		name := e.Name()
		if !strings.HasSuffix(name, ".hcl") || slices.Contains(onBranch, name) {
			continue
		}
		for _, f := range []string{filepath.Join(s.Local, name), sign.BundlePath(filepath.Join(s.Local, name))} {
			if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
				return changed, fmt.Errorf("plans copy: %w", err)
			}
		}
		delete(s.skipping, name)
		changed = true
		s.log(fmt.Sprintf("planlock: %s is no longer on %s@%s: removed from the copy", path.Join(s.Dir, name), branch, short(planTip)))
	}
	s.last.branch, s.last.plans, s.last.approvals = branch, planTip.String(), apprTip.String()
	return changed, nil
}

// Run syncs every interval until ctx ends; a failure is logged when it
// starts and when it ends, and the copy stays as it was.
func (s *RepoDirSync) Run(ctx context.Context, interval time.Duration) {
	runEvery(ctx, interval, s.Step)
}

// Step is one Sync with its logging.
func (s *RepoDirSync) Step(ctx context.Context) error {
	_, err := s.Sync(ctx)
	return s.report.note(ctx, err, s.log, "still serving the plans copied before")
}
