package sign

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func envMap(m map[string]string) Getenv { return func(k string) string { return m[k] } }

// TestIDTokenFromActions talks to a stand-in for GitHub's token endpoint,
// which cannot run here; it answers as GitHub documents ({"value": JWT}).
func TestIDTokenFromActions(t *testing.T) {
	var gotAuth, gotAudience string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotAudience = r.Header.Get("Authorization"), r.URL.Query().Get("audience")
		if gotAuth != "Bearer req-token" {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		_, _ = w.Write([]byte(`{"count":1,"value":"eyJ.actions.jwt"}`))
	}))
	defer srv.Close()

	cases := []struct {
		name    string
		env     map[string]string
		want    string
		wantErr string
	}{
		{"SIGSTORE_ID_TOKEN wins", map[string]string{"SIGSTORE_ID_TOKEN": "eyJ.explicit", "ACTIONS_ID_TOKEN_REQUEST_URL": srv.URL + "?api-version=2.0", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "req-token"}, "eyJ.explicit", ""},
		{"Actions token", map[string]string{"ACTIONS_ID_TOKEN_REQUEST_URL": srv.URL + "?api-version=2.0", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "req-token"}, "eyJ.actions.jwt", ""},
		{"Actions refuses", map[string]string{"ACTIONS_ID_TOKEN_REQUEST_URL": srv.URL, "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "wrong"}, "", "id-token: write"},
		{"nothing available", map[string]string{}, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := IDToken(context.Background(), envMap(tc.env), srv.Client())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("token = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if gotAudience != "sigstore" {
		t.Errorf("audience = %q, want sigstore", gotAudience)
	}
}

func TestPredicateFromGitHub(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	prEvent := write("pr.json", `{"action":"closed","pull_request":{"number":17,"merged":true,"merge_commit_sha":"abc123","base":{"ref":"main"},"merged_by":{"login":"alice"}}}`)
	pushEvent := write("push.json", `{"after":"def456","head_commit":{"message":"Merge pull request #23 from acme/approve-refund\n\nApprove refund"}}`)
	squashEvent := write("squash.json", `{"after":"fed789","head_commit":{"message":"Approve refund-4711 (#31)"}}`)
	base := map[string]string{"GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": "acme/plans", "GITHUB_REF": "refs/heads/main", "GITHUB_SHA": "sha0"}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range base {
			m[a] = b
		}
		m[k] = v
		return m
	}
	cases := []struct {
		name string
		env  map[string]string
		want Predicate
	}{
		{"outside Actions", map[string]string{}, Predicate{}},
		{"no event", base, Predicate{Repository: "acme/plans", Ref: "refs/heads/main", Commit: "sha0"}},
		{"merged pull request", with("GITHUB_EVENT_PATH", prEvent), Predicate{Repository: "acme/plans", Ref: "refs/heads/main", Commit: "abc123", PullRequest: 17, Approvers: []string{"alice"}}},
		{"push of a merge commit", with("GITHUB_EVENT_PATH", pushEvent), Predicate{Repository: "acme/plans", Ref: "refs/heads/main", Commit: "def456", PullRequest: 23}},
		{"push of a squash merge", with("GITHUB_EVENT_PATH", squashEvent), Predicate{Repository: "acme/plans", Ref: "refs/heads/main", Commit: "fed789", PullRequest: 31}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PredicateFromGitHub(envMap(tc.env), os.ReadFile)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
	if _, err := PredicateFromGitHub(envMap(with("GITHUB_EVENT_PATH", write("bad.json", "{"))), os.ReadFile); err == nil {
		t.Fatal("broken event payload accepted")
	}
}

func TestCleanPath(t *testing.T) {
	for in, want := range map[string]string{"plans/a.hcl": "plans/a.hcl", "./plans//a.hcl": "plans/a.hcl", `plans\a.hcl`: "plans/a.hcl"} {
		if got, err := CleanPath(in); err != nil || got != want {
			t.Errorf("CleanPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "/etc/plan.hcl", "../plan.hcl", "plans/../../x", "."} {
		if got, err := CleanPath(bad); err == nil {
			t.Errorf("CleanPath(%q) = %q, want an error", bad, got)
		}
	}
}

func TestRepoPath(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "plans", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := RepoPath(filepath.Join(root, "plans", "sub", "a.hcl"))
	if err != nil || got != "plans/sub/a.hcl" {
		t.Fatalf("RepoPath in a checkout = %q, %v", got, err)
	}
	t.Chdir(filepath.Join(root, "plans"))
	if got, err := RepoPath("sub/a.hcl"); err != nil || got != "plans/sub/a.hcl" {
		t.Fatalf("RepoPath relative in a checkout = %q, %v", got, err)
	}
	outside := t.TempDir()
	t.Chdir(outside)
	if got, err := RepoPath("x/a.hcl"); err != nil || got != "x/a.hcl" {
		t.Fatalf("RepoPath outside a checkout = %q, %v", got, err)
	}
	if _, err := RepoPath(filepath.Join(outside, "a.hcl")); err == nil {
		t.Fatal("absolute path outside a checkout accepted")
	}
}
