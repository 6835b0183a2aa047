package gitapprove

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/planlock/planlock/internal/boundedio"
)

// ErrUnavailable marks failures to reach the Git remote or the forge. A hold
// that meets it is kept and retried: the call is blocked for now, nothing is lost.
var ErrUnavailable = errors.New("git remote or forge unreachable")

// unavailable wraps err so that errors.Is(err, ErrUnavailable) holds.
func unavailable(op string, err error) error {
	return &UnavailableError{Op: op, Err: err}
}

// UnavailableError is returned when the remote or the forge cannot be reached
// or refuses the credentials.
type UnavailableError struct {
	Op  string
	Err error
}

func (e *UnavailableError) Error() string { return e.Op + ": " + e.Err.Error() }
func (e *UnavailableError) Unwrap() []error {
	return []error{ErrUnavailable, e.Err}
}

// Options configures how a repository is opened.
type Options struct {
	// Remote is the remote to push to and fetch from; "origin" when empty.
	Remote string
	// Credentials give the HTTP basic auth (x-access-token) for an https
	// remote, by the host rule of Credentials. None: anonymous https, ssh
	// agent for ssh remotes.
	Credentials Credentials
	// Author signs the commits planlock makes; from the Git config when empty.
	Author *object.Signature
	// Now gives the commit time; time.Now when nil.
	Now func() time.Time
	// CABundle adds PEM CA certificates for an https remote (e.g. a GitHub
	// Enterprise server with a private CA).
	CABundle []byte
	// MaxFetchBytes bounds one fetch into a cache opened by OpenRefCache
	// (defaultMaxFetchBytes when 0).
	MaxFetchBytes int64
}

// Repo is a Git repository planlock commits approval branches into. Its
// methods are safe for concurrent use: one operation runs at a time, since
// go-git's on-disk storage is not safe for concurrent writers.
type Repo struct {
	mu     sync.Mutex
	repo   *git.Repository
	root   string
	remote string
	creds  Credentials
	caPEM  []byte
	author *object.Signature
	now    func() time.Time
}

// Open opens the repository that contains path, walking up to the .git
// directory (worktrees included).
func Open(p string, o Options) (*Repo, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", p, err)
	}
	dir := abs
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		dir = filepath.Dir(abs)
	}
	r, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if err != nil {
		return nil, fmt.Errorf("open the git repository containing %s: %w", p, err)
	}
	wt, err := r.Worktree()
	if err != nil {
		return nil, fmt.Errorf("repository containing %s has no work tree: %w", p, err)
	}
	return newRepo(r, wt.Filesystem.Root(), o), nil
}

func newRepo(r *git.Repository, root string, o Options) *Repo {
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real
	}
	rp := &Repo{repo: r, root: root, remote: o.Remote, creds: o.Credentials, caPEM: o.CABundle, author: o.Author, now: o.Now}
	if rp.remote == "" {
		rp.remote = "origin"
	}
	if rp.now == nil {
		rp.now = time.Now
	}
	return rp
}

// OpenCache opens the bare repository at dir, or clones url there (bare)
// when dir does not exist yet: a private copy for a long-running process
// such as the proxy, which only needs remote branches, never a work tree.
func OpenCache(ctx context.Context, url, dir string, o Options) (*Repo, error) {
	if o.Remote == "" {
		o.Remote = "origin"
	}
	r, err := git.PlainOpen(dir)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		rp := newRepo(nil, dir, o)
		rp.mu.Lock()
		defer rp.mu.Unlock()
		auth, aerr := o.Credentials.GitAuth(url)
		if aerr != nil {
			return nil, aerr
		}
		r, err = git.PlainCloneContext(ctx, dir, true, &git.CloneOptions{URL: url, RemoteName: o.Remote, Auth: auth, NoCheckout: true, CABundle: o.CABundle})
		if errors.Is(err, transport.ErrEmptyRemoteRepository) {
			r, err = git.PlainOpen(dir)
		}
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, unavailable("clone "+url, err)
		}
		rp.repo = r
		return rp, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	rp := newRepo(r, dir, o)
	if got, err := rp.RemoteURL(); err != nil || got != url {
		return nil, fmt.Errorf("%s is a clone of %q, not %q: remove it or use another directory", dir, got, url)
	}
	return rp, nil
}

// Root is the work tree's top directory.
func (r *Repo) Root() string { return r.root }

// RemoteName is the remote planlock pushes to.
func (r *Repo) RemoteName() string { return r.remote }

// RelPath gives p relative to the work tree root, slash-separated, and
// refuses paths outside the repository.
func (r *Repo) RelPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", p, err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	rel, err := filepath.Rel(r.root, abs)
	if err != nil || rel == "." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || rel == ".." {
		return "", fmt.Errorf("%s is not inside the repository %s", p, r.root)
	}
	return filepath.ToSlash(rel), nil
}

// RemoteURL is the first URL of the remote.
func (r *Repo) RemoteURL() (string, error) {
	rem, err := r.repo.Remote(r.remote)
	if err != nil {
		return "", fmt.Errorf("remote %q: %w", r.remote, err)
	}
	urls := rem.Config().URLs
	if len(urls) == 0 {
		return "", fmt.Errorf("remote %q has no URL", r.remote)
	}
	return urls[0], nil
}

// auth picks credentials for the remote URL (see Credentials).
func (r *Repo) auth() (transport.AuthMethod, error) {
	u, err := r.RemoteURL()
	if err != nil {
		return nil, err
	}
	return r.creds.GitAuth(u)
}

// remoteRef is where the remote's branch is tracked locally.
func (r *Repo) remoteRef(branch string) plumbing.ReferenceName {
	return plumbing.NewRemoteReferenceName(r.remote, branch)
}

// Fetch updates every remote-tracking branch. An empty remote is not an error.
func (r *Repo) Fetch(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	auth, err := r.auth()
	if err != nil {
		return err
	}
	spec := config.RefSpec(fmt.Sprintf("+refs/heads/*:refs/remotes/%s/*", r.remote))
	err = r.repo.FetchContext(ctx, &git.FetchOptions{RemoteName: r.remote, RefSpecs: []config.RefSpec{spec}, Auth: auth, Prune: true, CABundle: r.caPEM})
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate), errors.Is(err, transport.ErrEmptyRemoteRepository):
		return nil
	default:
		return unavailable("fetch "+r.remote, err)
	}
}

// DefaultBranch asks the remote which branch its HEAD points at, and falls
// back to the branch checked out locally.
func (r *Repo) DefaultBranch(ctx context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	auth, err := r.auth()
	if err != nil {
		return "", err
	}
	rem, err := r.repo.Remote(r.remote)
	if err != nil {
		return "", fmt.Errorf("remote %q: %w", r.remote, err)
	}
	refs, err := rem.ListContext(ctx, &git.ListOptions{Auth: auth, CABundle: r.caPEM})
	if err != nil && !errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return "", unavailable("list "+r.remote, err)
	}
	for _, ref := range refs {
		if ref.Name() == plumbing.HEAD && ref.Type() == plumbing.SymbolicReference && ref.Target().IsBranch() {
			return ref.Target().Short(), nil
		}
	}
	head, err := r.repo.Head()
	if err != nil || !head.Name().IsBranch() {
		return "", fmt.Errorf("cannot tell the base branch (remote HEAD unknown, no branch checked out): give --base")
	}
	return head.Name().Short(), nil
}

// RemoteBranchHash is the fetched tip of the remote's branch, ok=false when
// the remote has no such branch (as of the last Fetch).
func (r *Repo) RemoteBranchHash(branch string) (plumbing.Hash, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.remoteBranchHash(branch)
}

func (r *Repo) remoteBranchHash(branch string) (plumbing.Hash, bool, error) {
	ref, err := r.repo.Reference(r.remoteRef(branch), true)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return plumbing.ZeroHash, false, nil
	}
	if err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("read %s: %w", r.remoteRef(branch), err)
	}
	return ref.Hash(), true, nil
}

// ReadFile reads path at the fetched tip of the remote's branch.
// ok=false when the branch or the file does not exist there.
func (r *Repo) ReadFile(branch, p string) ([]byte, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok, err := r.remoteBranchHash(branch)
	if err != nil || !ok {
		return nil, false, err
	}
	return r.readFileAt(h, p)
}

// ReadFileAt reads path in the given commit.
func (r *Repo) ReadFileAt(commit plumbing.Hash, p string) ([]byte, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.readFileAt(commit, p)
}

func (r *Repo) readFileAt(commit plumbing.Hash, p string) ([]byte, bool, error) {
	c, err := r.repo.CommitObject(commit)
	if err != nil {
		return nil, false, fmt.Errorf("read commit %s: %w", commit, err)
	}
	f, err := c.File(p)
	if errors.Is(err, object.ErrFileNotFound) || errors.Is(err, object.ErrDirectoryNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %s at %s: %w", p, commit, err)
	}
	// Plans, holds and bundles: none is larger than a hold may be. The
	// size is checked before the blob is read.
	const max = boundedio.MaxHoldBytes
	name := fmt.Sprintf("%s at %s", p, commit)
	if f.Size > max {
		return nil, false, &boundedio.TooLargeError{Name: name, Limit: max}
	}
	rd, err := f.Reader()
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", name, err)
	}
	defer rd.Close()
	b, err := boundedio.ReadAll(rd, name, max)
	if errors.Is(err, boundedio.ErrTooLarge) {
		return nil, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", name, err)
	}
	return b, true, nil
}

// ListFilesAt lists the names of the files directly in directory dir
// (slash-separated, "" for the root) at commit, sorted; a missing directory
// lists nothing.
func (r *Repo) ListFilesAt(commit plumbing.Hash, dir string) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.repo.CommitObject(commit)
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", commit, err)
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("read the tree of %s: %w", commit, err)
	}
	if dir != "" && dir != "." {
		tree, err = tree.Tree(dir)
		if errors.Is(err, object.ErrDirectoryNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s at %s: %w", dir, commit, err)
		}
	}
	var names []string
	for _, e := range tree.Entries {
		if e.Mode.IsFile() {
			names = append(names, e.Name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// IsAncestor reports whether commit a is reachable from commit b.
func (r *Repo) IsAncestor(a, b plumbing.Hash) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ca, err := r.repo.CommitObject(a)
	if err != nil {
		return false, fmt.Errorf("read commit %s: %w", a, err)
	}
	cb, err := r.repo.CommitObject(b)
	if err != nil {
		return false, fmt.Errorf("read commit %s: %w", b, err)
	}
	return ca.IsAncestor(cb)
}

// CommitRequest describes one commit on a planlock branch.
type CommitRequest struct {
	// Branch receives the commit (e.g. planlock/approve/refund).
	Branch string
	// Base is the branch a new Branch starts from.
	Base string
	// Files maps repository paths (slash-separated) to their new content;
	// nil removes the file.
	Files   map[string][]byte
	Message string
	// FromBase starts Branch again from Base, ignoring what it holds (its
	// pull request was merged or closed); Push then needs Force.
	FromBase bool
}

// CommitResult tells what CommitFiles did.
type CommitResult struct {
	Commit plumbing.Hash
	// Changed is false when the branch already held exactly these files.
	Changed bool
}

// CommitFiles commits Files onto the remote's Branch (or a new branch from
// Base) without touching the work tree, the index or any local branch; Push
// then sends the commit. Call Fetch first. The commit goes on top of the
// existing remote branch so a reviewer's history is kept and the push
// fast-forwards.
func (r *Repo) CommitFiles(req CommitRequest) (CommitResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p := range req.Files {
		if err := checkRepoPath(p); err != nil {
			return CommitResult{}, err
		}
	}
	parent, ok, err := r.remoteBranchHash(req.Branch)
	if err != nil {
		return CommitResult{}, err
	}
	if !ok || req.FromBase {
		parent, ok, err = r.remoteBranchHash(req.Base)
		if err != nil {
			return CommitResult{}, err
		}
		if !ok {
			return CommitResult{}, fmt.Errorf("base branch %q not found on remote %q (fetch first, or give another base)", req.Base, r.remote)
		}
	}
	pc, err := r.repo.CommitObject(parent)
	if err != nil {
		return CommitResult{}, fmt.Errorf("read commit %s: %w", parent, err)
	}
	tree, err := pc.Tree()
	if err != nil {
		return CommitResult{}, fmt.Errorf("read tree of %s: %w", parent, err)
	}
	newTree, _, err := r.putFiles(tree, req.Files)
	if err != nil {
		return CommitResult{}, err
	}
	if newTree == tree.Hash {
		return CommitResult{Commit: parent}, nil
	}
	sig, err := r.signature()
	if err != nil {
		return CommitResult{}, err
	}
	c := &object.Commit{Author: *sig, Committer: *sig, Message: req.Message, TreeHash: newTree, ParentHashes: []plumbing.Hash{parent}}
	obj := r.repo.Storer.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return CommitResult{}, fmt.Errorf("encode commit: %w", err)
	}
	h, err := r.repo.Storer.SetEncodedObject(obj)
	if err != nil {
		return CommitResult{}, fmt.Errorf("store commit: %w", err)
	}
	return CommitResult{Commit: h, Changed: true}, nil
}

// Push sends commit to the remote's branch. It only fast-forwards: a
// branch someone rewrote meanwhile is not overwritten.
func (r *Repo) Push(ctx context.Context, branch string, commit plumbing.Hash) error {
	return r.push(ctx, branch, commit, false)
}

// PushForce replaces the remote's branch with commit: for a branch started
// again after its pull request was merged or closed.
func (r *Repo) PushForce(ctx context.Context, branch string, commit plumbing.Hash) error {
	return r.push(ctx, branch, commit, true)
}

func (r *Repo) push(ctx context.Context, branch string, commit plumbing.Hash, force bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	auth, err := r.auth()
	if err != nil {
		return err
	}
	spec := config.RefSpec(commit.String() + ":" + plumbing.NewBranchReferenceName(branch).String())
	if force {
		spec = "+" + spec
	}
	err = r.repo.PushContext(ctx, &git.PushOptions{RemoteName: r.remote, RefSpecs: []config.RefSpec{spec}, Auth: auth, CABundle: r.caPEM})
	if err == nil || errors.Is(err, git.NoErrAlreadyUpToDate) {
		// Keep the tracking ref in step so a later read sees what was pushed.
		if err := r.repo.Storer.SetReference(plumbing.NewHashReference(r.remoteRef(branch), commit)); err != nil {
			return fmt.Errorf("update %s: %w", r.remoteRef(branch), err)
		}
		return nil
	}
	if errors.Is(err, git.ErrNonFastForwardUpdate) || strings.Contains(err.Error(), "non-fast-forward") {
		return fmt.Errorf("push %s to %s: the remote branch moved meanwhile; run again: %w", branch, r.remote, err)
	}
	return unavailable("push "+branch+" to "+r.remote, err)
}

// CommitAuthor is the author of a commit.
func (r *Repo) CommitAuthor(h plumbing.Hash) (object.Signature, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.repo.CommitObject(h)
	if err != nil {
		return object.Signature{}, fmt.Errorf("read commit %s: %w", h, err)
	}
	return c.Author, nil
}

// Author is who planlock's commits are made as.
func (r *Repo) Author() (object.Signature, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, err := r.signature()
	if err != nil {
		return object.Signature{}, err
	}
	return *s, nil
}

func (r *Repo) signature() (*object.Signature, error) {
	if r.author != nil {
		s := *r.author
		s.When = r.now()
		return &s, nil
	}
	name, email := "planlock", "planlock@localhost"
	if cfg, err := r.repo.ConfigScoped(config.GlobalScope); err == nil {
		if cfg.User.Name != "" {
			name = cfg.User.Name
		}
		if cfg.User.Email != "" {
			email = cfg.User.Email
		}
	}
	return &object.Signature{Name: name, Email: email, When: r.now()}, nil
}

// checkRepoPath refuses paths that would escape the tree or touch .git.
func checkRepoPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || path.Clean(p) != p {
		return fmt.Errorf("invalid repository path %q", p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." || part == "." || strings.EqualFold(part, ".git") {
			return fmt.Errorf("invalid repository path %q", p)
		}
	}
	return nil
}

// putFiles writes blobs for files and returns the hash of tree with them in
// (a nil content removes the file) and how many entries that tree has.
func (r *Repo) putFiles(tree *object.Tree, files map[string][]byte) (plumbing.Hash, int, error) {
	// Group by first path element so each subtree is rebuilt once.
	here := map[string][]byte{}
	sub := map[string]map[string][]byte{}
	for p, b := range files {
		if i := strings.IndexByte(p, '/'); i >= 0 {
			if sub[p[:i]] == nil {
				sub[p[:i]] = map[string][]byte{}
			}
			sub[p[:i]][p[i+1:]] = b
		} else {
			here[p] = b
		}
	}
	entries := map[string]object.TreeEntry{}
	if tree != nil {
		for _, e := range tree.Entries {
			entries[e.Name] = e
		}
	}
	for name, b := range here {
		if e, ok := entries[name]; ok && e.Mode == filemode.Dir {
			return plumbing.ZeroHash, 0, fmt.Errorf("%s is a directory in the repository", name)
		}
		if b == nil {
			delete(entries, name)
			continue
		}
		h, err := r.storeBlob(b)
		if err != nil {
			return plumbing.ZeroHash, 0, err
		}
		mode := filemode.Regular
		if e, ok := entries[name]; ok && e.Mode == filemode.Executable {
			mode = e.Mode
		}
		entries[name] = object.TreeEntry{Name: name, Mode: mode, Hash: h}
	}
	for name, fs := range sub {
		var child *object.Tree
		if e, ok := entries[name]; ok {
			if e.Mode != filemode.Dir {
				return plumbing.ZeroHash, 0, fmt.Errorf("%s is a file in the repository", name)
			}
			t, err := r.repo.TreeObject(e.Hash)
			if err != nil {
				return plumbing.ZeroHash, 0, fmt.Errorf("read tree %s: %w", name, err)
			}
			child = t
		}
		h, n, err := r.putFiles(child, fs)
		if err != nil {
			return plumbing.ZeroHash, 0, err
		}
		if n == 0 { // Git has no empty directories
			delete(entries, name)
			continue
		}
		entries[name] = object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h}
	}
	nt := &object.Tree{}
	for _, e := range entries {
		nt.Entries = append(nt.Entries, e)
	}
	// Git's order: directories compare as if their name ended in "/".
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.Slice(nt.Entries, func(i, j int) bool { return key(nt.Entries[i]) < key(nt.Entries[j]) })
	obj := r.repo.Storer.NewEncodedObject()
	if err := nt.Encode(obj); err != nil {
		return plumbing.ZeroHash, 0, fmt.Errorf("encode tree: %w", err)
	}
	h, err := r.repo.Storer.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, 0, fmt.Errorf("store tree: %w", err)
	}
	return h, len(nt.Entries), nil
}

func (r *Repo) storeBlob(b []byte) (plumbing.Hash, error) {
	obj := r.repo.Storer.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	w, err := obj.Writer()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("store blob: %w", err)
	}
	if _, err := io.Copy(w, bytes.NewReader(b)); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("store blob: %w", err)
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("store blob: %w", err)
	}
	h, err := r.repo.Storer.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("store blob: %w", err)
	}
	return h, nil
}

// RemoteHeads is one ls-remote of the remote: the branch its HEAD names and
// the tip of every branch. It transfers no objects, so it is the cheap check
// before a fetch.
type RemoteHeads struct {
	Head     string
	Branches map[string]plumbing.Hash
}

// LsRemote lists the remote's branches without fetching.
func (r *Repo) LsRemote(ctx context.Context) (RemoteHeads, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	auth, err := r.auth()
	if err != nil {
		return RemoteHeads{}, err
	}
	rem, err := r.repo.Remote(r.remote)
	if err != nil {
		return RemoteHeads{}, fmt.Errorf("remote %q: %w", r.remote, err)
	}
	refs, err := rem.ListContext(ctx, &git.ListOptions{Auth: auth, CABundle: r.caPEM})
	if err != nil && !errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return RemoteHeads{}, unavailable("list "+r.remote, err)
	}
	out := RemoteHeads{Branches: map[string]plumbing.Hash{}}
	for _, ref := range refs {
		switch {
		case ref.Name() == plumbing.HEAD && ref.Type() == plumbing.SymbolicReference && ref.Target().IsBranch():
			out.Head = ref.Target().Short()
		case ref.Name().IsBranch() && ref.Type() == plumbing.HashReference:
			out.Branches[ref.Name().Short()] = ref.Hash()
		}
	}
	return out, nil
}

// changedFiles reports whether base already holds the version at tip of
// every file that tip changed against its merge base with base: then the
// branch's work is in base although its commits are not (squash or rebase
// merge). A branch that changed nothing reports false.
func (r *Repo) changedFiles(tip, base plumbing.Hash) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	tc, err := r.repo.CommitObject(tip)
	if err != nil {
		return false, fmt.Errorf("read commit %s: %w", tip, err)
	}
	bc, err := r.repo.CommitObject(base)
	if err != nil {
		return false, fmt.Errorf("read commit %s: %w", base, err)
	}
	mbs, err := tc.MergeBase(bc)
	if err != nil || len(mbs) == 0 {
		return false, err
	}
	from, err := mbs[0].Tree()
	if err != nil {
		return false, fmt.Errorf("read tree: %w", err)
	}
	to, err := tc.Tree()
	if err != nil {
		return false, fmt.Errorf("read tree: %w", err)
	}
	baseTree, err := bc.Tree()
	if err != nil {
		return false, fmt.Errorf("read tree: %w", err)
	}
	changes, err := from.Diff(to)
	if err != nil {
		return false, fmt.Errorf("diff %s: %w", tip, err)
	}
	if len(changes) == 0 {
		return false, nil
	}
	for _, ch := range changes {
		name := ch.To.Name
		if name == "" { // deleted on the branch
			if _, err := baseTree.File(ch.From.Name); err == nil {
				return false, nil
			}
			continue
		}
		f, err := baseTree.File(name)
		if err != nil || f.Hash != ch.To.TreeEntry.Hash {
			return false, nil
		}
	}
	return true, nil
}

// StageFiles records files (repository paths and the bytes committed for
// them) in the work tree's index, each only where the work tree's file
// holds exactly those bytes, and returns the paths it staged. An author's
// new plan would otherwise stay untracked beside the approval commit, and
// the "git pull" that brings the reviewer's merge would refuse to
// overwrite it; staged with the merged bytes, the pull fast-forwards.
func (r *Repo) StageFiles(files map[string][]byte) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	idx, err := r.repo.Storer.Index()
	if err != nil {
		return nil, fmt.Errorf("read the index: %w", err)
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var staged []string
	for _, p := range paths {
		if err := checkRepoPath(p); err != nil {
			return staged, err
		}
		full := filepath.Join(r.root, filepath.FromSlash(p))
		fi, err := os.Lstat(full)
		if err != nil || !fi.Mode().IsRegular() {
			continue // moved or removed since: nothing to stage
		}
		cur, err := boundedio.ReadFile(full, int64(len(files[p]))+1)
		if err != nil || !bytes.Equal(cur, files[p]) {
			continue // edited since: the author's change stays theirs
		}
		h, err := r.storeBlob(files[p])
		if err != nil {
			return staged, err
		}
		e, err := idx.Entry(p)
		if err != nil {
			e = idx.Add(p)
		} else if e.Stage != 0 {
			continue // a merge conflict there is the author's to settle
		}
		e.Hash, e.Mode, e.Size = h, filemode.Regular, uint32(fi.Size())
		if fi.Mode()&0o111 != 0 {
			e.Mode = filemode.Executable
		}
		// No inode or device: Git sees the stat data differ, compares
		// the content and refreshes the entry.
		e.ModifiedAt, e.CreatedAt = fi.ModTime(), fi.ModTime()
		staged = append(staged, p)
	}
	if len(staged) == 0 {
		return nil, nil
	}
	if err := r.repo.Storer.SetIndex(idx); err != nil {
		return nil, fmt.Errorf("write the index: %w", err)
	}
	return staged, nil
}
