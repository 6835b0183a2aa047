package gitapprove

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/planlock/planlock/internal/oneline"
)

// Approval kinds as the approvals branch and the signer name them.
const (
	kindPlan = "plan"
	kindHold = "hold"
)

// ApprovalFile is a plan or hold file at the reconciled commit.
type ApprovalFile struct {
	Path    string
	Kind    string // kindPlan or kindHold
	Content []byte
	// Bundle is its bundle on the approvals branch (nil when there is none).
	Bundle []byte
	// Problem says why it needs signing: no bundle, or why the bundle
	// does not verify. Empty for a file whose bundle is valid.
	Problem string
}

// ReconcileOptions says what to reconcile.
type ReconcileOptions struct {
	// Head is the commit whose files must all carry a valid approval.
	Head plumbing.Hash
	// PlansGlob and HoldsGlob select the files (bash globstar syntax, as
	// the workflow's paths filter: "plans/**/*.hcl").
	PlansGlob, HoldsGlob string
	// Approvals is the branch bundles are published on (its fetched
	// remote-tracking tip is read).
	Approvals string
	// Valid verifies bundle as an approval of content at path, of kind,
	// against the trust policy; nil error when it is valid.
	Valid func(ctx context.Context, path, kind string, content, bundle []byte) error
}

// Reconcile lists every plan and hold file at Head with the state of its
// approval, sorted by path. Approvals are decided by verifying, never by
// diffing pushes: a file whose run was cancelled, failed or never happened
// shows up here until a valid bundle for its exact bytes is published.
func (r *Repo) Reconcile(ctx context.Context, o ReconcileOptions) ([]ApprovalFile, error) {
	if o.Valid == nil {
		return nil, errors.New("reconcile: no trust policy to verify existing bundles with")
	}
	if o.Approvals == "" {
		o.Approvals = DefaultApprovalsBranch
	}
	if o.HoldsGlob == "" {
		o.HoldsGlob = "holds/**/*.hcl"
	}
	r.mu.Lock()
	c, err := r.repo.CommitObject(o.Head)
	if err != nil {
		r.mu.Unlock()
		return nil, fmt.Errorf("reconcile: read commit %s: %w", o.Head, err)
	}
	tree, err := c.Tree()
	if err != nil {
		r.mu.Unlock()
		return nil, fmt.Errorf("reconcile: read tree of %s: %w", o.Head, err)
	}
	var files []ApprovalFile
	err = tree.Files().ForEach(func(f *object.File) error {
		kind := ""
		switch {
		case strings.HasSuffix(f.Name, "_test.hcl"):
			// A plan's tests are reviewed with it but never signed: they
			// cannot change what the plan allows.
			return nil
		case globMatch(o.PlansGlob, f.Name):
			kind = kindPlan
		case globMatch(o.HoldsGlob, f.Name):
			kind = kindHold
		default:
			return nil
		}
		if !f.Mode.IsRegular() {
			// A symlink's target is not what a reviewer read: never signed.
			return nil
		}
		s, err := f.Contents()
		if err != nil {
			return fmt.Errorf("read %s: %w", f.Name, err)
		}
		files = append(files, ApprovalFile{Path: f.Name, Kind: kind, Content: []byte(s)})
		return nil
	})
	r.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("reconcile: list files of %s: %w", o.Head, err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	for i := range files {
		f := &files[i]
		b, ok, err := r.ReadFile(o.Approvals, f.Path+BundleSuffix)
		if err != nil {
			return nil, fmt.Errorf("reconcile: %w", err)
		}
		if !ok {
			f.Problem = "no bundle on " + o.Approvals
			continue
		}
		f.Bundle = b
		if err := o.Valid(ctx, f.Path, f.Kind, f.Content, b); err != nil {
			f.Problem = "bundle does not verify: " + oneline.Of(err.Error(), 0)
		}
	}
	return files, nil
}

// LastChange is the commit, from head back, that last changed p: the merge
// that brought the file's current bytes, whose pull request approved them.
func (r *Repo) LastChange(head plumbing.Hash, p string) (plumbing.Hash, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	it, err := r.repo.Log(&git.LogOptions{From: head, FileName: &p, Order: git.LogOrderCommitterTime})
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("history of %s: %w", p, err)
	}
	defer it.Close()
	c, err := it.Next()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("history of %s: %w", p, err)
	}
	return c.Hash, nil
}

// Head is the commit checked out in the work tree.
func (r *Repo) Head() (plumbing.Hash, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, err := r.repo.Head()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read HEAD: %w", err)
	}
	return h.Hash(), nil
}

// globMatch matches a slash-separated path against a pattern in bash
// globstar syntax: "*" within one path segment, "**" as a whole segment for
// any number of segments (zero included).
func globMatch(pattern, name string) bool {
	return globSegs(strings.Split(pattern, "/"), strings.Split(name, "/"))
}

func globSegs(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(name); i++ {
				if globSegs(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, err := path.Match(pat[0], name[0]); err != nil || !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}
