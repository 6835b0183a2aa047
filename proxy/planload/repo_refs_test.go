package planload

import (
	"context"
	"crypto/rand"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planlock/planlock/gitapprove"
)

// commitBlob commits size random (incompressible) bytes at path on branch
// and returns the blob's hash.
func (r *bareRepo) commitBlob(branch, path string, size int) string {
	r.t.Helper()
	b := make([]byte, size)
	if _, err := rand.Read(b); err != nil {
		r.t.Fatal(err)
	}
	r.commit(branch, path, string(b))
	out, err := exec.Command("git", "-C", r.work, "rev-parse", branch+":"+path).Output()
	if err != nil {
		r.t.Fatalf("rev-parse %s:%s: %v", branch, path, err)
	}
	return strings.TrimSpace(string(out))
}

// hasObject reports whether the bare repository at dir holds the object.
func hasObject(t *testing.T, dir, hash string) bool {
	t.Helper()
	return exec.Command("git", "--git-dir", dir, "cat-file", "-e", hash).Run() == nil
}

func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if fi, err := d.Info(); err == nil && !d.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The proxy's copy of the plans repository holds the plans branch and the
// approvals branch only: a large blob pushed to any other branch is never
// fetched, whether the branch was there before the first sync or pushed
// between two, for one plan (proxy --repo) and a directory (serve --repo).
func TestRepoSyncFetchesOnlyItsBranches(t *testing.T) {
	const big = 3 << 20
	opens := []struct {
		name string
		open func(ctx context.Context, url, dir string) (*gitapprove.Repo, error)
	}{
		{"existing cache", func(ctx context.Context, url, dir string) (*gitapprove.Repo, error) {
			return gitapprove.OpenCache(ctx, url, dir, gitapprove.Options{})
		}},
		{"ref cache", func(ctx context.Context, url, dir string) (*gitapprove.Repo, error) {
			return gitapprove.OpenRefCache(ctx, url, dir, gitapprove.Options{})
		}},
	}
	for _, o := range opens {
		for _, kind := range []string{"plan", "dir"} {
			t.Run(o.name+"/"+kind, func(t *testing.T) {
				r := newBareRepo(t)
				dir := t.TempDir()
				k := opensslKeys(t, dir, "release")
				cache := filepath.Join(dir, "git")
				r.commit("main", "plans/p.hcl", "v1")
				r.commit("planlock/approvals", "plans/p.hcl.sigstore.json", string(k.signBytes(t, []byte("v1"), "plans/p.hcl", t0)))
				before := ""
				if o.name == "ref cache" { // there before the first sync
					before = r.commitBlob("wip", "big.bin", big)
				}
				ctx := context.Background()
				open := func(ctx context.Context) (*gitapprove.Repo, error) { return o.open(ctx, "file://"+r.bare, cache) }
				var sync func() error
				if kind == "plan" {
					rs := &RepoSync{OpenRepo: open, Path: "plans/p.hcl", Dir: filepath.Join(dir, "plan")}
					sync = func() error { _, err := rs.Sync(ctx); return err }
				} else {
					rs := &RepoDirSync{OpenRepo: open, Dir: "plans", Local: filepath.Join(dir, "plans")}
					sync = func() error { _, err := rs.Sync(ctx); return err }
				}
				if err := sync(); err != nil {
					t.Fatal(err)
				}
				// Pushed between two syncs, while the branches read move.
				after := r.commitBlob("feature/x", "huge.bin", big)
				r.commitBlob("main", "other/big.txt", 1) // main moves: a fetch is due
				r.commit("planlock/approvals", "README", "moved")
				if err := sync(); err != nil {
					t.Fatal(err)
				}
				for _, h := range []string{before, after} {
					if h != "" && hasObject(t, cache, h) {
						t.Errorf("the cache holds blob %s of a branch the proxy does not read", h)
					}
				}
				if n := dirSize(t, cache); n > 1<<20 {
					t.Errorf("the cache is %d bytes, want under 1 MiB (only the plans and approvals branches)", n)
				}
			})
		}
	}
}

// One fetch is bounded: a plans branch whose new objects pass the bound is
// refused while it streams, the copy already made keeps serving, and the
// cache keeps none of it.
func TestRepoSyncFetchSizeBound(t *testing.T) {
	r := newBareRepo(t)
	dir := t.TempDir()
	k := opensslKeys(t, dir, "release")
	cache := filepath.Join(dir, "git")
	r.commit("main", "plans/p.hcl", "v1")
	b1 := string(k.signBytes(t, []byte("v1"), "plans/p.hcl", t0))
	r.commit("planlock/approvals", "plans/p.hcl.sigstore.json", b1)
	rs := &RepoSync{
		OpenRepo: func(ctx context.Context) (*gitapprove.Repo, error) {
			return gitapprove.OpenRefCache(ctx, "file://"+r.bare, cache, gitapprove.Options{MaxFetchBytes: 1 << 20})
		},
		Path: "plans/p.hcl", Dir: filepath.Join(dir, "plan"),
	}
	ctx := context.Background()
	if _, err := rs.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	blob := r.commitBlob("main", "plans/big.bin", 2<<20)
	_, err := rs.Sync(ctx)
	if err == nil || !strings.Contains(err.Error(), "more than 1048576 bytes, the bound of the repository cache") {
		t.Fatalf("Sync = %v, want the fetch bound", err)
	}
	if hasObject(t, cache, blob) {
		t.Error("the refused blob is in the cache")
	}
	if n := dirSize(t, cache); n > 1<<20 {
		out, _ := exec.Command("find", cache, "-size", "+100k").CombinedOutput()
		t.Errorf("the cache is %d bytes after a refused fetch, want under 1 MiB: %s", n, out)
	}
	if p, err := os.ReadFile(rs.File()); err != nil || string(p) != "v1" {
		t.Fatalf("copy = %q, %v; want the last one, v1", p, err)
	}
	// A plan within the bound is fetched again once the branch shrinks.
	r.git(r.work, "reset", "-q", "--hard", "HEAD~1")
	r.git(r.work, "push", "-q", "-f", "origin", "main")
	r.commit("main", "plans/p.hcl", "v2")
	r.commit("planlock/approvals", "plans/p.hcl.sigstore.json", string(k.signBytes(t, []byte("v2"), "plans/p.hcl", t0)))
	if _, err := rs.Sync(ctx); err != nil {
		t.Fatalf("Sync after the branch shrank: %v", err)
	}
	if p, _ := os.ReadFile(rs.File()); string(p) != "v2" {
		t.Fatalf("copy = %q, want v2", p)
	}
}
