package gitapprove

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// NewForge never hands the GitHub token to a client that would send it over
// plain http: an http remote on a GitHub host is a usage error, found before
// any request reaches the host.
func TestNewForgeRefusesTokenOverHTTP(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusTeapot)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	host := u.Hostname()
	creds := Credentials{GitHubToken: "s3cret", GitHubHosts: []string{host}}

	for _, tc := range []struct {
		name   string
		o      ForgeOptions
		errSub string
	}{
		{"http remote on a declared GitHub host", ForgeOptions{RemoteURL: "http://" + u.Host + "/acme/plans.git"}, "remote http://" + u.Host + "/acme/plans.git is plain http"},
		{"http github.com remote", ForgeOptions{RemoteURL: "http://github.com/acme/plans.git"}, "only ever sent over https"},
		{"http remote with user info is redacted", ForgeOptions{RemoteURL: "http://x:tok@github.com/acme/plans.git"}, "remote http://github.com/acme/plans.git is plain http"},
		{"http remote even with an https API", ForgeOptions{RemoteURL: "http://github.com/acme/plans.git", APIURL: "https://api.github.com"}, "plain http"},
		{"plain http API off loopback", ForgeOptions{RemoteURL: "https://github.com/acme/plans.git", APIURL: "http://ghe.example.com/api/v3"}, "must be an https URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _, err := NewForge(creds, tc.o)
			if err == nil || f != nil {
				t.Fatalf("NewForge = %v, %v; want an error", f, err)
			}
			if !errors.Is(err, ErrBadForgeOptions) || !strings.Contains(err.Error(), tc.errSub) {
				t.Fatalf("err = %v; want ErrBadForgeOptions containing %q", err, tc.errSub)
			}
			if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "tok@") {
				t.Fatalf("err leaks a secret: %v", err)
			}
		})
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests reached the host; want none", n)
	}

	// The same host over https gets a client (so the refusals above are the
	// scheme's doing), and a nil Forge interface means none.
	f, why, err := NewForge(creds, ForgeOptions{RemoteURL: "https://" + u.Host + "/acme/plans.git"})
	if err != nil || f == nil {
		t.Fatalf("https remote: NewForge = %v, %q, %v; want a forge", f, why, err)
	}
	f, why, err = NewForge(Credentials{}, ForgeOptions{RemoteURL: "http://github.com/acme/plans.git"})
	if err != nil || f != nil || !strings.Contains(why, "GH_TOKEN") {
		t.Fatalf("no token: NewForge = %v, %q, %v; want no forge, Git alone", f, why, err)
	}
}
