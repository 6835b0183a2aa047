package authn_test

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/planlock/planlock/internal/authn"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestResourceMetadataGolden(t *testing.T) {
	m, err := authn.NewResourceMetadata("https://planlock.example.com", "https://idp.example.com/realms/acme",
		[]string{"planlock:deploy", "planlock:refund"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + m.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %s %q", m.Path(), resp.Status, resp.Header.Get("Content-Type"))
	}
	golden(t, "prm.golden.json", body)

	resp, err = http.Post(srv.URL+m.Path(), "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %s", resp.Status)
	}
}

func TestResourceMetadataURLs(t *testing.T) {
	cases := []struct {
		resource, path, url string
	}{
		{"https://planlock.example.com", "/.well-known/oauth-protected-resource", "https://planlock.example.com/.well-known/oauth-protected-resource"},
		{"https://planlock.example.com/", "/.well-known/oauth-protected-resource", "https://planlock.example.com/.well-known/oauth-protected-resource"},
		{"https://example.com:8443/planlock", "/.well-known/oauth-protected-resource/planlock", "https://example.com:8443/.well-known/oauth-protected-resource/planlock"},
		{"http://127.0.0.1:9000", "/.well-known/oauth-protected-resource", "http://127.0.0.1:9000/.well-known/oauth-protected-resource"},
	}
	for _, c := range cases {
		m, err := authn.NewResourceMetadata(c.resource, "https://idp.example.com", nil)
		if err != nil {
			t.Fatal(err)
		}
		if m.Path() != c.path || m.URL() != c.url {
			t.Errorf("%s: path %q url %q, want %q %q", c.resource, m.Path(), m.URL(), c.path, c.url)
		}
	}
	for _, bad := range []string{"planlock.example.com", "http://planlock.example.com", "https://planlock.example.com/?x=1", "https://u:p@planlock.example.com"} {
		if _, err := authn.NewResourceMetadata(bad, "https://idp.example.com", nil); err == nil {
			t.Errorf("resource %q accepted", bad)
		}
	}
}

func TestChallenge(t *testing.T) {
	m, _ := authn.NewResourceMetadata("https://planlock.example.com", "https://idp.example.com", nil)
	const md = `resource_metadata="https://planlock.example.com/.well-known/oauth-protected-resource"`
	cases := []struct {
		err  error
		want string
	}{
		{nil, "Bearer " + md},
		{authn.ErrNoCredentials, "Bearer " + md},
		{fmt.Errorf("%w: expired", authn.ErrInvalidToken), "Bearer " + md + `, error="invalid_token"`},
		{errors.New("unknown static token"), "Bearer " + md + `, error="invalid_token"`},
	}
	for _, c := range cases {
		if got := m.Challenge(c.err); got != c.want {
			t.Errorf("Challenge(%v) = %s, want %s", c.err, got, c.want)
		}
	}
	if got := m.ForbiddenChallenge(); got != "Bearer "+md+`, error="insufficient_scope"` {
		t.Errorf("ForbiddenChallenge = %s", got)
	}
}
