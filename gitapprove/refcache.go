package gitapprove

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// defaultMaxFetchBytes bounds one fetch into a ref cache (OpenRefCache)
// unless Options.MaxFetchBytes says otherwise.
const defaultMaxFetchBytes = 64 << 20

// OpenRefCache opens the bare repository at dir, or makes an empty one
// there for url, without fetching anything: a private copy for a process
// that reads a few branches (the proxy's plans and approvals branches) and
// fetches them by name with FetchBranches, so what is pushed to any other
// branch never lands in it. Every pack fetched into it is bounded by
// o.MaxFetchBytes (defaultMaxFetchBytes when 0); a larger one is refused
// while it streams.
func OpenRefCache(ctx context.Context, url, dir string, o Options) (*Repo, error) {
	if o.Remote == "" {
		o.Remote = "origin"
	}
	max := o.MaxFetchBytes
	if max == 0 {
		max = defaultMaxFetchBytes
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	_, statErr := os.Stat(dir)
	if statErr != nil && !errors.Is(statErr, os.ErrNotExist) {
		return nil, fmt.Errorf("open %s: %w", dir, statErr)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("make %s: %w", dir, err)
	}
	st := &boundedStorage{Storage: filesystem.NewStorage(osfs.New(dir), cache.NewObjectLRUDefault()), max: max}
	if errors.Is(statErr, os.ErrNotExist) {
		r, err := git.Init(st, nil)
		if err == nil {
			_, err = r.CreateRemote(&config.RemoteConfig{Name: o.Remote, URLs: []string{url}})
		}
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("make the repository cache %s: %w", dir, err)
		}
		// Reach the remote once, as a clone would, so a wrong URL fails now.
		rp := newRepo(r, dir, o)
		if _, err := rp.LsRemote(ctx); err != nil {
			_ = os.RemoveAll(dir)
			var u *UnavailableError
			if errors.As(err, &u) {
				return nil, unavailable("clone "+url, u.Err)
			}
			return nil, err
		}
		return rp, nil
	}
	r, err := git.Open(st, nil)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	rp := newRepo(r, dir, o)
	if got, err := rp.RemoteURL(); err != nil || got != url {
		return nil, fmt.Errorf("%s is a clone of %q, not %q: remove it or use another directory", dir, got, url)
	}
	return rp, nil
}

// FetchBranches updates the remote-tracking refs of exactly these branches;
// nothing of any other branch is fetched. A branch the remote does not have
// is an error.
func (r *Repo) FetchBranches(ctx context.Context, branches ...string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	auth, err := r.auth()
	if err != nil {
		return err
	}
	var specs []config.RefSpec
	for _, b := range branches {
		spec := config.RefSpec(fmt.Sprintf("+refs/heads/%s:refs/remotes/%s/%s", b, r.remote, b))
		if err := spec.Validate(); err != nil || spec.IsWildcard() {
			return fmt.Errorf("branch name %q cannot be fetched", b)
		}
		specs = append(specs, spec)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	bounded, _ := r.repo.Storer.(*boundedStorage)
	if bounded != nil {
		bounded.begin(cancel)
	}
	err = r.repo.FetchContext(ctx, &git.FetchOptions{RemoteName: r.remote, RefSpecs: specs, Auth: auth, CABundle: r.caPEM})
	if bounded != nil && bounded.exceeded() {
		// The cut pack stays as a temporary file of go-git's: remove it.
		tmp, _ := filepath.Glob(filepath.Join(r.root, "objects", "pack", "tmp_pack_*"))
		for _, f := range tmp {
			_ = os.Remove(f)
		}
		return &FetchTooLargeError{Max: bounded.max}
	}
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate):
		return nil
	default:
		return unavailable("fetch "+r.remote, err)
	}
}

// FetchTooLargeError is a fetch refused because its pack passed the bound.
type FetchTooLargeError struct{ Max int64 }

func (e *FetchTooLargeError) Error() string {
	return fmt.Sprintf("the fetched objects are more than %d bytes, the bound of the repository cache; nothing was kept", e.Max)
}

// boundedStorage is go-git's on-disk storage whose pack writer takes at
// most max bytes of one fetch. Past the bound it cancels the fetch (the
// transport then stops the remote side) and drops the rest.
type boundedStorage struct {
	*filesystem.Storage
	max int64

	mu     sync.Mutex
	cancel context.CancelFunc
	over   bool
}

// begin arms the bound for one fetch; cancel stops it.
func (s *boundedStorage) begin(cancel context.CancelFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cancel, s.over = cancel, false
}

func (s *boundedStorage) exceeded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.over
}

func (s *boundedStorage) exceed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.over = true
	if s.cancel != nil {
		s.cancel()
	}
}

func (s *boundedStorage) PackfileWriter() (io.WriteCloser, error) {
	w, err := s.Storage.PackfileWriter()
	if err != nil {
		return nil, err
	}
	return &limitedPackWriter{w: w, left: s.max, s: s}, nil
}

type limitedPackWriter struct {
	w    io.WriteCloser
	left int64
	s    *boundedStorage
}

func (l *limitedPackWriter) Write(p []byte) (int, error) {
	if l.left < 0 {
		return len(p), nil // dropped: the fetch is being cancelled
	}
	if int64(len(p)) > l.left {
		l.left = -1
		l.s.exceed()
		return len(p), nil
	}
	l.left -= int64(len(p))
	return l.w.Write(p)
}

func (l *limitedPackWriter) Close() error {
	err := l.w.Close()
	if l.left < 0 {
		return &FetchTooLargeError{Max: l.s.max}
	}
	return err
}
