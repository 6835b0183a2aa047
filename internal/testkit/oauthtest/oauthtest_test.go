package oauthtest_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/planlock/planlock/internal/authn"
	"github.com/planlock/planlock/internal/testkit/oauthtest"
)

const aud = "https://planlock.example.com"

func postForm(t *testing.T, u string, form url.Values, user, pass string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

func verify(t *testing.T, as *oauthtest.Server, tok any) authn.Identity {
	t.Helper()
	a, err := authn.NewJWT(authn.JWTConfig{Issuer: as.Issuer(), Audience: aud})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := tok.(string)
	id, err := a.Verify(context.Background(), s)
	if err != nil {
		t.Fatalf("token from the token endpoint: %v", err)
	}
	return id
}

func TestClientCredentials(t *testing.T) {
	as := oauthtest.New(t)
	as.DefaultAudience = "https://unused.example.com"
	as.AddClient(oauthtest.Client{ID: "bot", Secret: "pw", Claims: map[string]any{"groups": []string{"ops"}}})
	form := url.Values{"grant_type": {"client_credentials"}, "resource": {aud}}
	if code, body := postForm(t, as.URL+"/token", form, "bot", "wrong"); code != 401 || body["error"] != "invalid_client" {
		t.Fatalf("wrong secret: %d %v", code, body)
	}
	code, body := postForm(t, as.URL+"/token", form, "bot", "pw")
	if code != 200 || body["token_type"] != "Bearer" {
		t.Fatalf("basic: %d %v", code, body)
	}
	if id := verify(t, as, body["access_token"]); id.Subject != "jwt:bot" {
		t.Fatalf("identity %+v", id)
	}
	post := url.Values{"grant_type": {"client_credentials"}, "resource": {aud}, "client_id": {"bot"}, "client_secret": {"pw"}}
	if code, body := postForm(t, as.URL+"/token", post, "", ""); code != 200 {
		t.Fatalf("client_secret_post: %d %v", code, body)
	}
}

func TestAuthorizationCodeWithPKCE(t *testing.T) {
	as := oauthtest.New(t)
	as.SetUser(oauthtest.User{Subject: "alice"})
	// Dynamic registration.
	resp, err := http.Post(as.URL+"/register", "application/json",
		strings.NewReader(`{"redirect_uris": ["http://127.0.0.1:1/cb"], "client_name": "t"}`))
	if err != nil {
		t.Fatal(err)
	}
	var reg map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&reg)
	resp.Body.Close()
	id, secret := reg["client_id"].(string), reg["client_secret"].(string)
	if resp.StatusCode != 201 || id == "" || secret == "" {
		t.Fatalf("register: %d %v", resp.StatusCode, reg)
	}
	verifier := "a-verifier-of-enough-length-0123456789-abcdefghij"
	sum := sha256.Sum256([]byte(verifier))
	authorize := func(redirect string) url.Values {
		q := url.Values{"response_type": {"code"}, "client_id": {id}, "redirect_uri": {redirect}, "state": {"st"},
			"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}, "resource": {aud}}
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Get(as.URL + "/authorize?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound {
			return nil
		}
		loc, _ := url.Parse(resp.Header.Get("Location"))
		return loc.Query()
	}
	if authorize("http://127.0.0.1:1/elsewhere") != nil {
		t.Fatal("an unregistered redirect_uri was redirected to")
	}
	back := authorize("http://127.0.0.1:1/cb")
	if back.Get("state") != "st" || back.Get("code") == "" {
		t.Fatalf("authorize redirect: %v", back)
	}
	exchange := func(verifier string) (int, map[string]any) {
		return postForm(t, as.URL+"/token", url.Values{"grant_type": {"authorization_code"}, "code": {back.Get("code")},
			"redirect_uri": {"http://127.0.0.1:1/cb"}, "code_verifier": {verifier}}, id, secret)
	}
	if code, body := exchange("not-the-verifier"); code != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("wrong verifier: %d %v", code, body)
	}
	// A failed exchange burnt the code, as one use only must.
	back = authorize("http://127.0.0.1:1/cb")
	code, body := exchange(verifier)
	if code != 200 {
		t.Fatalf("exchange: %d %v", code, body)
	}
	if got := verify(t, as, body["access_token"]); got.Subject != "jwt:alice" {
		t.Fatalf("identity %+v", got)
	}
	if code, body := exchange(verifier); code != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("code reused: %d %v", code, body)
	}
}

func TestMetadataNamesItself(t *testing.T) {
	as := oauthtest.New(t)
	for _, p := range []string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"} {
		resp, err := http.Get(as.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		var md map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&md)
		resp.Body.Close()
		if md["issuer"] != as.Issuer() || md["jwks_uri"] != as.JWKSURL() {
			t.Fatalf("%s: %v", p, md)
		}
	}
}
