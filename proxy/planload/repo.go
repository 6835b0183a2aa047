package planload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/sign"
)

// RepoSync keeps a plan from a Git repository (GitOps): the plan file from
// the default branch and its bundle from the approvals branch, at the same
// path plus .sigstore.json, copied into Dir where a Source and its Reloader
// read them. RepoSync only transports: it verifies nothing, and the Reloader
// applies every rule of a load (signature, path, expiry, no downgrade) before
// a copied plan is served, so a tampered or stale plan in the repository is
// refused there and the last verified plan keeps serving.
type RepoSync struct {
	// Repo is the local clone; when nil, OpenRepo makes it on first use (and
	// again after it failed), so a proxy starts while the remote is down.
	Repo     *gitapprove.Repo
	OpenRepo func(ctx context.Context) (*gitapprove.Repo, error)
	// Path is the plan's path in the repository (slash-separated).
	Path string
	// Branch is where the plan is read; the remote's default branch when empty.
	Branch string
	// Approvals is the branch with the bundles; gitapprove.DefaultApprovalsBranch when empty.
	Approvals string
	// Dir receives the plan file (named as Path's last element) and its bundle.
	Dir string
	// Log receives one line per event; nil discards.
	Log func(string)

	last struct {
		branch          string
		plan, approvals plumbing.Hash
	}
	report syncReport
}

// SyncResult is what one Sync saw.
type SyncResult struct {
	// Moved is true when a ref moved since the last Sync (a fetch was done).
	Moved bool
	// Changed is true when the files in Dir were replaced.
	Changed bool
}

// File is the local copy of the plan.
func (s *RepoSync) File() string { return filepath.Join(s.Dir, path.Base(s.Path)) }

// Source is the Source reading the local copy, verified with policy as
// signed at Path.
func (s *RepoSync) Source(policy *sign.Policy) Source {
	return Source{File: s.File(), Path: s.Path, Policy: policy}
}

func (s *RepoSync) approvals() string {
	if s.Approvals != "" {
		return s.Approvals
	}
	return gitapprove.DefaultApprovalsBranch
}

func (s *RepoSync) log(m string) {
	if s.Log != nil {
		s.Log(m)
	}
}

// Sync asks the remote for the tips of the two branches (one ls-remote, no
// objects), and only when one moved fetches and copies the plan and its
// bundle into Dir. A plan without a bundle yet (CI has not signed it) is
// not copied, nor one whose bundle names other bytes (the signature of the
// merge is not published yet). The files already in Dir stay as they are on
// any error.
func (s *RepoSync) Sync(ctx context.Context) (SyncResult, error) {
	if s.Repo == nil {
		if s.OpenRepo == nil {
			return SyncResult{}, fmt.Errorf("no plans repository")
		}
		r, err := s.OpenRepo(ctx)
		if err != nil {
			return SyncResult{}, fmt.Errorf("clone the plans repository: %w", err)
		}
		s.Repo = r
	}
	heads, err := s.Repo.LsRemote(ctx)
	if err != nil {
		return SyncResult{}, fmt.Errorf("look up the plans repository: %w", err)
	}
	branch := s.Branch
	if branch == "" {
		branch = heads.Head
	}
	if branch == "" {
		return SyncResult{}, fmt.Errorf("the plans repository has no default branch (HEAD); give the branch")
	}
	planTip, ok := heads.Branches[branch]
	if !ok {
		return SyncResult{}, fmt.Errorf("the plans repository has no branch %q", branch)
	}
	apprTip, ok := heads.Branches[s.approvals()]
	if !ok {
		return SyncResult{}, fmt.Errorf("the plans repository has no approvals branch %q (CI publishes the signatures there)", s.approvals())
	}
	if s.last.branch == branch && s.last.plan == planTip && s.last.approvals == apprTip {
		return SyncResult{}, nil
	}
	// Only the two branches read: whatever is pushed to another branch
	// (unreviewed work) never reaches this copy.
	if err := s.Repo.FetchBranches(ctx, branch, s.approvals()); err != nil {
		return SyncResult{}, fmt.Errorf("fetch the plans repository: %w", err)
	}
	// Read at the tips ls-remote saw, so plan and bundle come from one look.
	plan, ok, err := s.Repo.ReadFileAt(planTip, s.Path)
	if err != nil {
		return SyncResult{}, err
	}
	if !ok {
		return SyncResult{}, fmt.Errorf("%s is not on branch %s (commit %s)", s.Path, branch, short(planTip))
	}
	bundle, ok, err := s.Repo.ReadFileAt(apprTip, s.Path+gitapprove.BundleSuffix)
	if err != nil {
		return SyncResult{}, err
	}
	if !ok {
		return SyncResult{}, fmt.Errorf("%s at %s@%s has no signature bundle on %s yet (CI signs merged plans)", s.Path, branch, short(planTip), s.approvals())
	}
	// Between a merge and CI publishing its signature the bundle there is
	// the previous plan's: wait for it rather than hand the Reloader a pair
	// it must refuse. (Only a hint: the Reloader verifies what is copied.)
	if sum := sha256.Sum256(plan); !bundleNames(bundle, hex.EncodeToString(sum[:])) {
		return SyncResult{}, fmt.Errorf("%s at %s@%s has no signature for these bytes on %s@%s (not signed yet, or not approved)", s.Path, branch, short(planTip), s.approvals(), short(apprTip))
	}
	changed, err := s.write(plan, bundle)
	if err != nil {
		return SyncResult{}, err
	}
	s.last.branch, s.last.plan, s.last.approvals = branch, planTip, apprTip
	if changed {
		s.log(fmt.Sprintf("planlock: fetched %s from %s@%s with its bundle from %s@%s", s.Path, branch, short(planTip), s.approvals(), short(apprTip)))
	}
	return SyncResult{Moved: true, Changed: changed}, nil
}

// write replaces the bundle, then the plan, each atomically, and only when
// they differ: the Reloader acts once both look the same twice in a row.
func (s *RepoSync) write(plan, bundle []byte) (bool, error) {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return false, fmt.Errorf("plans copy: %w", err)
	}
	return writePair(s.File(), plan, bundle)
}

// Run syncs every interval until ctx ends. A failure keeps the last copy
// (so the last verified plan keeps serving) and is logged when it starts
// and when it ends, not on every look.
func (s *RepoSync) Run(ctx context.Context, interval time.Duration) {
	runEvery(ctx, interval, s.Step)
}

// Step is one Sync with its logging: a failure is logged when it first
// happens (or changes), not on every look.
func (s *RepoSync) Step(ctx context.Context) error {
	_, err := s.Sync(ctx)
	return s.report.note(ctx, err, s.log, "still serving the last verified plan")
}

// bundleNames reports whether a sigstore bundle's in-toto statement names
// the sha256 hex digest as a subject. It verifies nothing.
func bundleNames(bundle []byte, hexDigest string) bool {
	var b struct {
		DSSE struct {
			Payload []byte `json:"payload"`
		} `json:"dsseEnvelope"`
	}
	if json.Unmarshal(bundle, &b) != nil {
		return false
	}
	var st struct {
		Subject []struct {
			Digest map[string]string `json:"digest"`
		} `json:"subject"`
	}
	if json.Unmarshal(b.DSSE.Payload, &st) != nil {
		return false
	}
	for _, sub := range st.Subject {
		if strings.EqualFold(sub.Digest["sha256"], hexDigest) {
			return true
		}
	}
	return false
}

func short(h plumbing.Hash) string { return h.String()[:12] }
