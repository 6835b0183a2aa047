package planload

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planlock/planlock/gitapprove"
)

type bareRepo struct {
	t          testing.TB
	bare, work string
}

func newBareRepo(t testing.TB) *bareRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	r := &bareRepo{t: t, bare: filepath.Join(dir, "origin.git"), work: filepath.Join(dir, "work")}
	r.git(dir, "init", "-q", "--bare", "-b", "main", r.bare)
	r.git(dir, "init", "-q", "-b", "main", r.work)
	r.git(r.work, "remote", "add", "origin", r.bare)
	return r
}

func (r *bareRepo) git(dir string, args ...string) {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=ci", "-c", "user.email=ci@example.com", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+r.t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func (r *bareRepo) commit(branch, path, content string) {
	r.t.Helper()
	if exec.Command("git", "-C", r.work, "rev-parse", "--verify", "-q", "refs/heads/"+branch).Run() == nil {
		r.git(r.work, "checkout", "-q", branch)
	} else {
		r.git(r.work, "checkout", "-q", "-b", branch)
	}
	full := filepath.Join(r.work, filepath.FromSlash(path))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.git(r.work, "add", path)
	r.git(r.work, "commit", "-q", "-m", "update")
	r.git(r.work, "push", "-q", "origin", branch)
}

// RepoSync copies the plan and its bundle only when a branch moved, never a
// plan without its bundle, and keeps the copy when the remote fails.
func TestRepoSync(t *testing.T) {
	r := newBareRepo(t)
	dir := t.TempDir()
	k := opensslKeys(t, dir, "release")
	b1, b2 := string(k.signBytes(t, []byte("v1"), "plans/p.hcl", t0)), string(k.signBytes(t, []byte("v2"), "plans/p.hcl", t0))
	var logs []string
	rs := &RepoSync{
		OpenRepo: func(ctx context.Context) (*gitapprove.Repo, error) {
			return gitapprove.OpenCache(ctx, "file://"+r.bare, filepath.Join(dir, "git"), gitapprove.Options{})
		},
		Path: "plans/p.hcl", Dir: filepath.Join(dir, "plan"), Log: func(s string) { logs = append(logs, s) },
	}
	ctx := context.Background()
	read := func() (string, string) {
		p, _ := os.ReadFile(rs.File())
		b, _ := os.ReadFile(rs.File() + ".sigstore.json")
		return string(p), string(b)
	}
	steps := []struct {
		name    string
		do      func()
		err     string
		moved   bool
		changed bool
		plan    string
		bundle  string
	}{
		{"no plan", func() { r.commit("main", "README", "x") }, `no approvals branch "planlock/approvals"`, false, false, "", ""},
		{"no plan on main", func() { r.commit("planlock/approvals", "README", "y") }, "plans/p.hcl is not on branch main", false, false, "", ""},
		{"plan and no bundle", func() { r.commit("main", "plans/p.hcl", "v1") }, "has no signature bundle on planlock/approvals yet", false, false, "", ""},
		{"plan and bundle", func() { r.commit("planlock/approvals", "plans/p.hcl.sigstore.json", b1) }, "", true, true, "v1", b1},
		{"nothing moved: no fetch", func() {}, "", false, false, "v1", b1},
		{"another branch moved: no fetch", func() { r.commit("planlock/hold/x", "holds/x.hcl", "h") }, "", false, false, "v1", b1},
		{"new plan, its signature not yet published", func() { r.commit("main", "plans/p.hcl", "v2") }, "has no signature for these bytes on planlock/approvals@", false, false, "v1", b1},
		{"its bundle published", func() { r.commit("planlock/approvals", "plans/p.hcl.sigstore.json", b2) }, "", true, true, "v2", b2},
		{"a bundle that is not JSON", func() { r.commit("planlock/approvals", "plans/p.hcl.sigstore.json", "junk") }, "has no signature for these bytes", false, false, "v2", b2},
		{"remote gone", func() {
			if err := os.Rename(r.bare, r.bare+".gone"); err != nil {
				t.Fatal(err)
			}
		}, "look up the plans repository", false, false, "v2", b2},
	}
	for _, s := range steps {
		s.do()
		res, err := rs.Sync(ctx)
		if s.err == "" && err != nil || s.err != "" && (err == nil || !strings.Contains(err.Error(), s.err)) {
			t.Fatalf("%s: err = %v, want %q", s.name, err, s.err)
		}
		if s.err == "" && (res.Moved != s.moved || res.Changed != s.changed) {
			t.Errorf("%s: %+v, want moved %v changed %v", s.name, res, s.moved, s.changed)
		}
		if p, b := read(); p != s.plan || b != s.bundle {
			t.Errorf("%s: copy = %q, %q; want %q, %q", s.name, p, b, s.plan, s.bundle)
		}
	}
	// Step logs a failure once, not on every look.
	logs = nil
	for range 3 {
		_ = rs.Step(ctx)
	}
	if len(logs) != 1 || !strings.Contains(logs[0], "still serving the last verified plan") {
		t.Errorf("logs = %q", logs)
	}
}

// BenchmarkRepoSync compares a look when nothing moved (one ls-remote, no
// fetch) with one after a branch moved (ls-remote, fetch, copy).
func BenchmarkRepoSync(b *testing.B) {
	r := newBareRepo(b)
	dir := b.TempDir()
	k := opensslKeys(b, dir, "release")
	r.commit("main", "plans/p.hcl", "v1")
	r.commit("planlock/approvals", "plans/p.hcl.sigstore.json", string(k.signBytes(b, []byte("v1"), "plans/p.hcl", t0)))
	rs := &RepoSync{
		OpenRepo: func(ctx context.Context) (*gitapprove.Repo, error) {
			return gitapprove.OpenCache(ctx, "file://"+r.bare, filepath.Join(dir, "git"), gitapprove.Options{})
		},
		Path: "plans/p.hcl", Dir: filepath.Join(dir, "plan"),
	}
	ctx := context.Background()
	if _, err := rs.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	b.Run("nothing moved", func(b *testing.B) {
		for b.Loop() {
			if res, err := rs.Sync(ctx); err != nil || res.Moved {
				b.Fatal(res, err)
			}
		}
	})
	b.Run("a branch moved", func(b *testing.B) {
		for b.Loop() {
			rs.last.plan = [20]byte{} // as if main had moved: fetch and read again
			if res, err := rs.Sync(ctx); err != nil || !res.Moved {
				b.Fatal(res, err)
			}
		}
	})
}
