package gitapprove

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/planlock/planlock/internal/testkit/githubtest"
)

// gitEnv isolates the real git command from the machine's configuration.
func gitEnv(home string) []string {
	return append(os.Environ(),
		"HOME="+home,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL="+filepath.Join(home, ".gitconfig"),
		"GIT_AUTHOR_NAME=Reviewer", "GIT_AUTHOR_EMAIL=reviewer@example.com",
		"GIT_COMMITTER_NAME=Reviewer", "GIT_COMMITTER_EMAIL=reviewer@example.com",
	)
}

// git runs the real git command in dir and returns its trimmed stdout.
func rgit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv(t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// gitFails runs git and expects it to fail.
func rgitFails(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv(t.TempDir())
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("git %s succeeded, want failure\n%s", strings.Join(args, " "), out)
	}
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fixture is a bare origin made by the real git, the user's clone, and a
// second clone that plays the reviewer (and CI).
type fixture struct {
	origin, work, reviewer string
}

func newFixture(t testing.TB, base string, files map[string]string) fixture {
	t.Helper()
	root := t.TempDir()
	f := fixture{origin: filepath.Join(root, "origin.git"), work: filepath.Join(root, "work"), reviewer: filepath.Join(root, "reviewer")}
	rgit(t, root, "init", "--bare", "-q", "-b", base, f.origin)
	rgit(t, root, "clone", "-q", f.origin, f.work)
	rgit(t, f.work, "checkout", "-q", "-b", base)
	if files == nil {
		files = map[string]string{"README.md": "# demo\n"}
	}
	for p, c := range files {
		writeFile(t, filepath.Join(f.work, p), c)
	}
	rgit(t, f.work, "add", "-A")
	rgit(t, f.work, "commit", "-q", "-m", "initial")
	rgit(t, f.work, "push", "-q", "origin", base)
	rgit(t, root, "clone", "-q", f.origin, f.reviewer)
	return f
}

var testAuthor = &object.Signature{Name: "planlock test", Email: "planlock@example.com"}

func fixedNow() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) }

func openRepo(t testing.TB, dir string) *Repo {
	t.Helper()
	r, err := Open(dir, Options{Author: testAuthor, Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	return t.Context()
}

func fakeClient(gh *githubtest.Server) *GitHub {
	return NewGitHub(GitHubOptions{APIURL: gh.URL(), WebURL: gh.WebURL(), Owner: "acme", Repo: "plans", Token: "tok"})
}
