package gitapprove

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/planlock/planlock/internal/testkit/githubtest"
)

// Each way GitHub refuses a request comes back as its own error type, and
// only the passing ones (rate limits) count as unavailable.
func TestGitHubErrorsAreTyped(t *testing.T) {
	reset := time.Date(2026, 11, 30, 13, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		setup     func(*githubtest.Server)
		body      string
		check     func(t *testing.T, err error)
		transient bool // errors.Is(err, ErrUnavailable); else ErrPermanent
	}{
		{"primary rate limit", func(g *githubtest.Server) { g.SetRateLimit(0, reset) }, "b", func(t *testing.T, err error) {
			var e *RateLimitError
			if !errors.As(err, &e) || !e.Reset.Equal(reset) || !strings.Contains(err.Error(), "resets at 2026-11-30T13:00:00Z") {
				t.Fatalf("err = %v, want a RateLimitError resetting at %s", err, reset)
			}
		}, true},
		{"secondary rate limit", func(g *githubtest.Server) { g.SetSecondaryRateLimit(1, 42) }, "b", func(t *testing.T, err error) {
			var e *SecondaryRateLimitError
			if !errors.As(err, &e) || e.RetryAfter != 42*time.Second {
				t.Fatalf("err = %v, want a SecondaryRateLimitError retrying after 42s", err)
			}
		}, true},
		{"private repository", func(g *githubtest.Server) { g.Deny(githubtest.DenyPrivate) }, "b", func(t *testing.T, err error) {
			var e *PermissionError
			if !errors.As(err, &e) || e.Status != 404 || !strings.Contains(e.Hint, "private and not visible to this token") {
				t.Fatalf("err = %v, want a 404 PermissionError about a private repository", err)
			}
		}, false},
		{"read-only token", func(g *githubtest.Server) { g.Deny(githubtest.DenyWrite) }, "b", func(t *testing.T, err error) {
			var e *PermissionError
			if !errors.As(err, &e) || e.Status != 403 || !strings.Contains(e.Hint, "pull-requests: write") {
				t.Fatalf("err = %v, want a 403 PermissionError naming pull-requests: write", err)
			}
		}, false},
		{"Actions may not open pull requests", func(g *githubtest.Server) { g.Deny(githubtest.DenyActionsPRs) }, "b", func(t *testing.T, err error) {
			var e *PermissionError
			if !errors.As(err, &e) || !strings.Contains(e.Hint, "Allow GitHub Actions to create and approve pull requests") {
				t.Fatalf("err = %v, want the Actions setting as the hint", err)
			}
		}, false},
		{"validation", func(g *githubtest.Server) { g.SetNoCommits(true) }, "b", func(t *testing.T, err error) {
			var e *ValidationError
			if !errors.As(err, &e) || e.Status != 422 {
				t.Fatalf("err = %v, want a ValidationError", err)
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gh := githubtest.New(t, "acme", "plans", "tok")
			tc.setup(gh)
			_, err := fakeClient(gh).CreateOrUpdatePR(ctx(t), "planlock/approve/p", "main", "t", tc.body)
			tc.check(t, err)
			if got := errors.Is(err, ErrUnavailable); got != tc.transient {
				t.Errorf("errors.Is(err, ErrUnavailable) = %v, want %v", got, tc.transient)
			}
			if got := errors.Is(err, ErrPermanent); got == tc.transient {
				t.Errorf("errors.Is(err, ErrPermanent) = %v, want %v", got, !tc.transient)
			}
			var ae *APIError
			if !errors.As(err, &ae) {
				t.Errorf("the APIError is still there: %v", err)
			}
		})
	}
}

// A body over GitHub's limit is cut to fit (the fake answers 422 otherwise);
// a hold's long arguments are left to the hold file.
func TestBodiesFitGitHubsLimit(t *testing.T) {
	gh := githubtest.New(t, "acme", "plans", "tok")
	c := fakeClient(gh)
	huge := strings.Repeat("é", maxPRBody+10)
	if _, err := c.CreateOrUpdatePR(ctx(t), "b", "main", "t", huge); err != nil {
		t.Fatalf("a long body is cut, not refused: %v", err)
	}
	if got := gh.Pull(1).Body; len([]rune(got)) > maxPRBody || !strings.Contains(got, "(cut: GitHub allows 65536 characters") {
		t.Errorf("body of %d characters, ends %q", len([]rune(got)), got[len(got)-80:])
	}

	hold := sampleHold()
	big, _ := json.Marshal(map[string]string{"note": strings.Repeat("x", 70000)})
	hold.Args = big
	hold.Reason = strings.Repeat("r", 5000)
	body := holdBody(hold, nil)
	if n := len([]rune(body)); n > maxPRBody {
		t.Fatalf("hold body has %d characters", n)
	}
	for _, want := range []string{"are too long for a pull request description", hold.Path(), "rrr…"} {
		if !strings.Contains(body, want) {
			t.Errorf("hold body lacks %q", want)
		}
	}
	if strings.Contains(body, strings.Repeat("x", 100)) {
		t.Error("the arguments are still in the body")
	}
	// Short arguments stay in the body, exactly.
	if small := holdBody(sampleHold(), nil); !strings.Contains(small, `"amount": 30`) {
		t.Errorf("short arguments missing:\n%s", small)
	}
}

// A repeated GET is conditional: GitHub's 304 (free of rate limit) gives
// back the answer kept, and a change is still seen.
func TestConditionalRequests(t *testing.T) {
	gh := githubtest.New(t, "acme", "plans", "tok")
	c := fakeClient(gh)
	if _, err := c.CreateOrUpdatePR(ctx(t), "b", "main", "t", "x"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		pr, err := c.GetPR(ctx(t), 1)
		if err != nil || pr.State != PROpen || pr.Number != 1 {
			t.Fatalf("GetPR %d = %+v, %v", i, pr, err)
		}
	}
	if n := gh.NotModified(); n != 2 {
		t.Errorf("304 answers = %d, want 2", n)
	}
	gh.Merge(1, strings.Repeat("d", 40))
	if pr, err := c.GetPR(ctx(t), 1); err != nil || pr.State != PRMerged {
		t.Fatalf("after merge: %+v, %v", pr, err)
	}
	if n := gh.NotModified(); n != 2 {
		t.Errorf("a changed pull request was answered 304")
	}
}
