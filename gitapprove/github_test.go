package gitapprove

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/planlock/planlock/internal/testkit/githubtest"
)

func TestCreateOrUpdatePRHandlesExistingPR(t *testing.T) {
	gh := githubtest.New(t, "acme", "plans", "tok")
	c := fakeClient(gh)
	first, err := c.CreateOrUpdatePR(ctx(t), "planlock/approve/refund", "main", "Approve refund", "v1")
	if err != nil {
		t.Fatal(err)
	}
	if first.Number != 1 || first.State != PROpen || first.URL != "https://github.example/acme/plans/pull/1" || first.MergeCommit != "" {
		t.Fatalf("created PR = %+v", first)
	}
	second, err := c.CreateOrUpdatePR(ctx(t), "planlock/approve/refund", "main", "Approve refund (2)", "v2")
	if err != nil {
		t.Fatal(err)
	}
	if second.Number != 1 || gh.Count() != 1 {
		t.Fatalf("second call made PR %d (%d PRs), want #1 updated", second.Number, gh.Count())
	}
	if p := gh.Pull(1); p.Body != "v2" || p.Title != "Approve refund (2)" {
		t.Errorf("PR not updated: %+v", p)
	}
	// After the first PR is merged, the same branch gets a new PR.
	gh.Merge(1, strings.Repeat("b", 40))
	third, err := c.CreateOrUpdatePR(ctx(t), "planlock/approve/refund", "main", "t", "v3")
	if err != nil || third.Number != 2 {
		t.Fatalf("after merge: %+v, %v; want new PR #2", third, err)
	}
}

func TestCreatePRFailures(t *testing.T) {
	t.Run("no commits", func(t *testing.T) {
		gh := githubtest.New(t, "acme", "plans", "tok")
		gh.SetNoCommits(true)
		_, err := fakeClient(gh).CreateOrUpdatePR(ctx(t), "b", "main", "t", "")
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != 422 || !strings.Contains(err.Error(), "No commits between main and b") {
			t.Fatalf("err = %v, want the 422 with GitHub's message", err)
		}
		if errors.Is(err, ErrUnavailable) {
			t.Error("a validation failure is not unavailability")
		}
	})
	t.Run("bad credentials", func(t *testing.T) {
		gh := githubtest.New(t, "acme", "plans", "tok")
		c := NewGitHub(GitHubOptions{APIURL: gh.URL(), Owner: "acme", Repo: "plans", Token: "wrong"})
		_, err := c.CreateOrUpdatePR(ctx(t), "b", "main", "t", "")
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "401 Bad credentials") {
			t.Fatalf("err = %v, want 401 Bad credentials, unavailable", err)
		}
	})
	t.Run("unknown repository", func(t *testing.T) {
		gh := githubtest.New(t, "acme", "plans", "tok")
		c := NewGitHub(GitHubOptions{APIURL: gh.URL(), Owner: "acme", Repo: "nope", Token: "tok"})
		_, err := c.CreateOrUpdatePR(ctx(t), "b", "main", "t", "")
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != 404 || ae.Message != "Not Found" {
			t.Fatalf("err = %v, want 404 Not Found", err)
		}
	})
	t.Run("server down", func(t *testing.T) {
		gh := githubtest.New(t, "acme", "plans", "tok")
		c := fakeClient(gh)
		gh.Close()
		if _, err := c.GetPR(ctx(t), 1); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("err = %v, want ErrUnavailable", err)
		}
	})
	t.Run("server error", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprint(w, "<html>bad gateway</html>")
		}))
		defer srv.Close()
		c := NewGitHub(GitHubOptions{APIURL: srv.URL, Owner: "a", Repo: "b", Token: "t"})
		_, err := c.GetPR(ctx(t), 1)
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "502 Bad Gateway") {
			t.Fatalf("err = %v, want 502, unavailable", err)
		}
	})
}

func TestGetPRStates(t *testing.T) {
	gh := githubtest.New(t, "acme", "plans", "tok")
	c := fakeClient(gh)
	for i := 0; i < 3; i++ {
		if _, err := c.CreateOrUpdatePR(ctx(t), fmt.Sprintf("b%d", i), "main", "t", ""); err != nil {
			t.Fatal(err)
		}
	}
	sha := strings.Repeat("c", 40)
	gh.Merge(2, sha)
	gh.ClosePull(3)
	for _, tc := range []struct {
		n         int
		state     PRState
		mergeSHA  string
		wantError bool
	}{
		{1, PROpen, "", false}, // the open PR's test-merge sha is not reported
		{2, PRMerged, sha, false},
		{3, PRClosed, "", false},
		{4, "", "", true},
	} {
		pr, err := c.GetPR(ctx(t), tc.n)
		if (err != nil) != tc.wantError {
			t.Fatalf("GetPR(%d) err = %v", tc.n, err)
		}
		if pr.State != tc.state || pr.MergeCommit != tc.mergeSHA {
			t.Errorf("GetPR(%d) = %+v, want %s %q", tc.n, pr, tc.state, tc.mergeSHA)
		}
	}
}

func TestFindPRFollowsPagination(t *testing.T) {
	gh := githubtest.New(t, "acme", "plans", "tok")
	c := fakeClient(gh)
	// GitHub allows one open pull request per head and base: a branch may
	// have 130 open ones into other bases, and the one into main on page 2.
	for i := 0; i < 130; i++ {
		gh.AddPull(githubtest.Pull{Number: i + 1, Head: "planlock/x", Base: fmt.Sprintf("release-%d", i), State: "open"})
	}
	gh.AddPull(githubtest.Pull{Number: 131, Head: "planlock/x", Base: "main", State: "open", HeadSHA: strings.Repeat("d", 40)})
	gh.AddPull(githubtest.Pull{Number: 132, Head: "planlock/y", Base: "main", State: "closed"})

	pr, ok, err := c.FindPR(ctx(t), "planlock/x")
	if err != nil || !ok || pr.Number != 1 {
		t.Fatalf("FindPR = %+v, %v, %v; want the first open one", pr, ok, err)
	}
	if _, ok, err := c.FindPR(ctx(t), "planlock/y"); ok || err != nil {
		t.Fatalf("FindPR(closed only) = %v, %v", ok, err)
	}
	// The 422 path must update the PR into the same base, found on page 2.
	got, err := c.CreateOrUpdatePR(ctx(t), "planlock/x", "main", "t", "updated")
	if err != nil || got.Number != 131 || gh.Pull(131).Body != "updated" || gh.Pull(1).Body != "" {
		t.Fatalf("CreateOrUpdatePR = %+v, %v", got, err)
	}
	var listed []string
	for _, r := range gh.Requests() {
		if strings.HasPrefix(r, "GET ") && strings.Contains(r, "/pulls?") {
			listed = append(listed, r)
		}
	}
	if len(listed) != 4 || !strings.HasPrefix(listed[3], "GET /repositories/1/pulls?") || !strings.Contains(listed[3], "page=2") {
		t.Errorf("list requests = %q; want x, y, then x page 1 and its Link-header page 2", listed)
	}
}

func TestReviewsFollowsLinkPagination(t *testing.T) {
	gh := githubtest.New(t, "acme", "plans", "tok")
	c := fakeClient(gh)
	if _, err := c.CreateOrUpdatePR(ctx(t), "b", "main", "t", ""); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 230; i++ {
		r := map[string]any{
			"id": i, "user": map[string]any{"login": fmt.Sprintf("u%d", i)}, "state": "COMMENTED",
			"commit_id": strings.Repeat("e", 40), "submitted_at": "2026-11-30T10:00:00Z",
		}
		switch i {
		case 229:
			r["state"] = "APPROVED"
		case 228:
			r["user"] = nil // a deleted account ("ghost")
		}
		gh.AddReview(1, r)
	}
	rs, err := c.Reviews(ctx(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 230 || rs[0].User != "u0" || rs[229].State != "APPROVED" || rs[228].User != "" || rs[5].SubmittedAt.IsZero() {
		t.Fatalf("got %d reviews, first %+v last %+v", len(rs), rs[0], rs[len(rs)-1])
	}
	pages := 0
	for _, r := range gh.Requests() {
		if strings.Contains(r, "/reviews") {
			pages++
		}
	}
	if pages != 3 {
		t.Errorf("fetched %d pages, want 3 (100+100+30)", pages)
	}
	if _, err := c.Reviews(ctx(t), 99); err == nil {
		t.Error("reviews of an unknown PR succeeded")
	}
}

// The token must stay on the API host: a Link header to another host is not followed.
func TestPaginationNeverLeavesAPIHost(t *testing.T) {
	var foreign atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		foreign.Add(1)
		fmt.Fprint(w, "[]")
	}))
	defer other.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "<"+other.URL+"/steal?page=2>; rel=\"next\"")
		fmt.Fprint(w, "[]")
	}))
	defer api.Close()
	c := NewGitHub(GitHubOptions{APIURL: api.URL, Owner: "a", Repo: "b", Token: "secret"})
	if _, err := c.Reviews(ctx(t), 1); err != nil {
		t.Fatal(err)
	}
	if foreign.Load() != 0 {
		t.Fatal("client followed a Link to another host")
	}
}

func TestDefaultBranchAndCompareURL(t *testing.T) {
	gh := githubtest.New(t, "acme", "plans", "tok")
	c := fakeClient(gh)
	if b, err := c.DefaultBranch(ctx(t)); err != nil || b != "main" {
		t.Fatalf("DefaultBranch = %q, %v", b, err)
	}
	if got, want := c.CompareURL("planlock/approve/refund", "main"), "https://github.example/acme/plans/compare/main...planlock/approve/refund?expand=1"; got != want {
		t.Errorf("CompareURL = %s, want %s", got, want)
	}
}

func TestParseRemoteURL(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want RemoteRepo
		err  bool
	}{
		{"https://github.com/acme/plans.git", RemoteRepo{"github.com", "acme", "plans"}, false},
		{"https://github.com/acme/plans", RemoteRepo{"github.com", "acme", "plans"}, false},
		{"https://x-access-token:abc@github.com/acme/plans.git/", RemoteRepo{"github.com", "acme", "plans"}, false},
		{"git@github.com:acme/plans.git", RemoteRepo{"github.com", "acme", "plans"}, false},
		{"ssh://git@GitHub.com/acme/plans.git", RemoteRepo{"github.com", "acme", "plans"}, false},
		{"ssh://git@ghe.corp.example:2222/team/plans.git", RemoteRepo{"ghe.corp.example", "team", "plans"}, false},
		{"https://ghe.corp.example/team/plans", RemoteRepo{"ghe.corp.example", "team", "plans"}, false},
		{"/srv/git/plans.git", RemoteRepo{}, true},
		{"file:///srv/git/plans.git", RemoteRepo{}, true},
		{"https://github.com/acme", RemoteRepo{}, true},
		{"https://gitlab.com/group/sub/plans.git", RemoteRepo{}, true},
	} {
		got, err := ParseRemoteURL(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseRemoteURL(%q) = %+v, %v; want %+v, err=%v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestGitHubEndpoints(t *testing.T) {
	for _, tc := range []struct {
		name      string
		host      string
		env       map[string]string
		api, web  string
		notGitHub bool
	}{
		{"github.com", "github.com", nil, "https://api.github.com", "https://github.com", false},
		{"enterprise via GH_HOST", "ghe.corp.example", map[string]string{"GH_HOST": "ghe.corp.example"}, "https://ghe.corp.example/api/v3", "https://ghe.corp.example", false},
		{"enterprise in Actions", "ghe.corp.example", map[string]string{"GITHUB_SERVER_URL": "https://ghe.corp.example", "GITHUB_API_URL": "https://ghe.corp.example/api/v3"}, "https://ghe.corp.example/api/v3", "https://ghe.corp.example", false},
		{"API URL on another host is ignored", "ghe.corp.example", map[string]string{"GH_HOST": "ghe.corp.example", "GITHUB_API_URL": "https://evil.example/api/v3"}, "https://ghe.corp.example/api/v3", "https://ghe.corp.example", false},
		{"undeclared host", "git.corp.example", map[string]string{"GH_HOST": "ghe.corp.example"}, "", "", true},
		{"no env", "gitlab.com", nil, "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api, web, err := gitHubEndpoints(RemoteRepo{Host: tc.host, Owner: "o", Name: "r"}, func(k string) string { return tc.env[k] })
			if tc.notGitHub {
				if !errors.Is(err, ErrNotGitHub) {
					t.Fatalf("err = %v, want ErrNotGitHub", err)
				}
				return
			}
			if err != nil || api != tc.api || web != tc.web {
				t.Fatalf("= %s, %s, %v; want %s, %s", api, web, err, tc.api, tc.web)
			}
		})
	}
}
