package gitapprove

import (
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// An https remote served by the real git (git http-backend, the smart HTTP
// server) behind basic auth the way GitHub checks it: the token goes as the
// password of user x-access-token.
func TestHTTPSRemoteWithTokenAgainstGitHTTPBackend(t *testing.T) {
	f := newFixture(t, "main", nil)
	rgit(t, f.origin, "config", "http.receivepack", "true")
	backend := filepath.Join(rgit(t, f.work, "--exec-path"), "git-http-backend")
	var authed, refused atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if !ok || user != "x-access-token" || pass != "s3cret" {
			refused.Add(1)
			w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
			http.Error(w, "Invalid username or token.", http.StatusUnauthorized)
			return
		}
		authed.Add(1)
		(&cgi.Handler{Path: backend, Env: []string{
			"GIT_PROJECT_ROOT=" + filepath.Dir(f.origin), "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1",
		}}).ServeHTTP(w, r)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusted-certificate case logs a handshake error
	srv.StartTLS()
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	rgit(t, f.work, "remote", "set-url", "origin", srv.URL+"/origin.git")

	r, err := Open(f.work, Options{Credentials: Credentials{GitToken: "s3cret"}, CABundle: ca, Author: testAuthor, Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := r.DefaultBranch(ctx(t)); err != nil || b != "main" {
		t.Fatalf("DefaultBranch over https = %q, %v", b, err)
	}
	if err := r.Fetch(ctx(t)); err != nil {
		t.Fatal(err)
	}
	res, err := r.CommitFiles(CommitRequest{Branch: "planlock/approve/p", Base: "main", Files: map[string][]byte{"p.hcl": []byte("p\n")}, Message: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Push(ctx(t), "planlock/approve/p", res.Commit); err != nil {
		t.Fatalf("push over https: %v", err)
	}
	if got := rgit(t, f.origin, "cat-file", "-p", "planlock/approve/p:p.hcl"); got != "p" {
		t.Errorf("pushed file = %q", got)
	}
	if authed.Load() == 0 {
		t.Fatal("the server never saw the token")
	}

	for _, tc := range []struct{ name, token string }{{"wrong token", "nope"}, {"no token", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			before := refused.Load()
			r, err := Open(f.work, Options{Credentials: Credentials{GitToken: tc.token}, CABundle: ca})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Fetch(ctx(t)); !errors.Is(err, ErrUnavailable) {
				t.Errorf("Fetch = %v, want ErrUnavailable", err)
			}
			if refused.Load() == before {
				t.Error("the server was not asked")
			}
		})
	}
	t.Run("untrusted certificate", func(t *testing.T) {
		r, err := Open(f.work, Options{Credentials: Credentials{GitToken: "s3cret"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Fetch(ctx(t)); !errors.Is(err, ErrUnavailable) {
			t.Errorf("Fetch without the CA = %v, want ErrUnavailable", err)
		}
	})
}

// go-git runs git-upload-pack / git-receive-pack for local remotes. Stubs
// that record their environment prove the token is not handed to them.
func TestTokenNeverReachesChildProcesses(t *testing.T) {
	f := newFixture(t, "main", nil)
	exec := rgit(t, f.work, "--exec-path")
	bin, logs := t.TempDir(), t.TempDir()
	for _, name := range []string{"git-upload-pack", "git-receive-pack"} {
		writeFile(t, filepath.Join(bin, name), "#!/bin/sh\nenv > \""+logs+"/"+name+".$$\"\nexec \""+filepath.Join(exec, name)+"\" \"$@\"\n")
		if err := os.Chmod(filepath.Join(bin, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	const token = "ghp_secretTokenValue123"
	holds := &Holds{Repo: mustOpen(t, f.work, Options{Credentials: Credentials{GitToken: token}, Author: testAuthor, Now: fixedNow}), Base: "main"}
	if _, err := holds.Open(ctx(t), sampleHold(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := holds.Status(ctx(t), sampleHold(), 0); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(logs)
	if err != nil || len(entries) < 2 {
		t.Fatalf("stubs ran %d times (%v): the test proves nothing", len(entries), err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(logs, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), token) {
			t.Errorf("%s saw the token in its environment", e.Name())
		}
	}
}

func mustOpen(t *testing.T, dir string, o Options) *Repo {
	t.Helper()
	r, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
