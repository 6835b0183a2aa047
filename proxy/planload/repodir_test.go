package planload

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/planlock/planlock/gitapprove"
)

// RepoDirSync copies every signed plan of a directory, leaves out one not
// signed yet (keeping its earlier copy), and removes one gone from the
// branch.
func TestRepoDirSync(t *testing.T) {
	r := newBareRepo(t)
	dir := t.TempDir()
	k := opensslKeys(t, dir, "release")
	sig := func(content, name string) string { return string(k.signBytes(t, []byte(content), "plans/"+name, t0)) }
	var logs []string
	rs := &RepoDirSync{
		OpenRepo: func(ctx context.Context) (*gitapprove.Repo, error) {
			return gitapprove.OpenCache(ctx, "file://"+r.bare, filepath.Join(dir, "git"), gitapprove.Options{})
		},
		Dir: "plans", Local: filepath.Join(dir, "copy"), Log: func(s string) { logs = append(logs, s) },
	}
	ctx := context.Background()
	copyOf := func() []string { // name=content of each plan, and which have a bundle
		ents, _ := os.ReadDir(rs.Local)
		var out []string
		for _, e := range ents {
			b, _ := os.ReadFile(filepath.Join(rs.Local, e.Name()))
			if strings.HasSuffix(e.Name(), ".sigstore.json") {
				out = append(out, e.Name())
				continue
			}
			out = append(out, e.Name()+"="+string(b))
		}
		return out
	}
	steps := []struct {
		name    string
		do      func()
		err     string
		changed bool
		want    []string
	}{
		{"no approvals branch", func() { r.commit("main", "README", "x") }, `no approvals branch`, false, nil},
		{"no plans directory yet", func() { r.commit("planlock/approvals", "README", "y") }, "", false, nil},
		{"a without bundle", func() { r.commit("main", "plans/a.hcl", "a1") }, "", false, nil},
		{"a signed", func() { r.commit("planlock/approvals", "plans/a.hcl.sigstore.json", sig("a1", "a.hcl")) }, "", true,
			[]string{"a.hcl=a1", "a.hcl.sigstore.json"}},
		{"b without bundle, a test file and a README", func() {
			r.commit("main", "plans/b.hcl", "b1")
			r.commit("main", "plans/b_test.hcl", "t")
			r.commit("main", "plans/README.md", "r")
			r.commit("main", "other/c.hcl", "c1")
		}, "", false, []string{"a.hcl=a1", "a.hcl.sigstore.json"}},
		{"b signed", func() { r.commit("planlock/approvals", "plans/b.hcl.sigstore.json", sig("b1", "b.hcl")) }, "", true,
			[]string{"a.hcl=a1", "a.hcl.sigstore.json", "b.hcl=b1", "b.hcl.sigstore.json"}},
		{"a changed, not signed yet: the old copy stays", func() { r.commit("main", "plans/a.hcl", "a2") }, "", false,
			[]string{"a.hcl=a1", "a.hcl.sigstore.json", "b.hcl=b1", "b.hcl.sigstore.json"}},
		{"a's new signature", func() { r.commit("planlock/approvals", "plans/a.hcl.sigstore.json", sig("a2", "a.hcl")) }, "", true,
			[]string{"a.hcl=a2", "a.hcl.sigstore.json", "b.hcl=b1", "b.hcl.sigstore.json"}},
		{"b removed from the branch", func() {
			r.git(r.work, "checkout", "-q", "main")
			r.git(r.work, "rm", "-q", "plans/b.hcl")
			r.git(r.work, "commit", "-q", "-m", "remove b")
			r.git(r.work, "push", "-q", "origin", "main")
		}, "", true, []string{"a.hcl=a2", "a.hcl.sigstore.json"}},
		{"nothing moved", func() {}, "", false, []string{"a.hcl=a2", "a.hcl.sigstore.json"}},
		{"remote gone", func() {
			if err := os.Rename(r.bare, r.bare+".gone"); err != nil {
				t.Fatal(err)
			}
		}, "look up the plans repository", false, []string{"a.hcl=a2", "a.hcl.sigstore.json"}},
	}
	for _, s := range steps {
		s.do()
		changed, err := rs.Sync(ctx)
		if s.err == "" && err != nil || s.err != "" && (err == nil || !strings.Contains(err.Error(), s.err)) {
			t.Fatalf("%s: err = %v, want %q", s.name, err, s.err)
		}
		if changed != s.changed {
			t.Errorf("%s: changed %v, want %v", s.name, changed, s.changed)
		}
		if got := copyOf(); !slices.Equal(got, s.want) {
			t.Errorf("%s: copy %v, want %v", s.name, got, s.want)
		}
	}
	joined := strings.Join(logs, "\n")
	for _, want := range []string{"plans/b.hcl at main@", "has no signature bundle on planlock/approvals yet", "has no signature for these bytes", "plans/b.hcl is no longer on main@"} {
		if !strings.Contains(joined, want) {
			t.Errorf("log lacks %q:\n%s", want, joined)
		}
	}
}
