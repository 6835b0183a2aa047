package sign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/planlock/planlock/internal/testkit/sigstoretest"
)

// The keyless tests sign with the real sigstore-go signing code against an
// in-process fake Fulcio and Rekor (see package sigstoretest for what is
// faithful and what is not), then verify against the trusted root it writes.

const (
	testRepo     = "acme/plans"
	testWorkflow = ".github/workflows/sign.yml"
	testRef      = "refs/heads/main"
	testPath     = "plans/refund.hcl"
)

var testPlan = []byte(`plan "refund-4711" {
  goal = "Refund order 4711"
  step "lookup" {
    tool = "get_order"
    arg "order_id" { eq = "4711" }
  }
}
`)

func newFake(t testing.TB) *sigstoretest.Sigstore {
	t.Helper()
	fs, err := sigstoretest.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fs.Close)
	return fs
}

func signKeyless(t testing.TB, fs *sigstoretest.Sigstore, c sigstoretest.Claims, content []byte, pred Predicate) []byte {
	t.Helper()
	s, err := Sign(context.Background(), content, pred, SignOptions{
		IDToken:   c.Token(),
		FulcioURL: fs.Fulcio.URL,
		RekorURL:  fs.Rekor.URL,
	})
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	if s.Signer.Identity != c.Identity() || s.Signer.Issuer != c.Issuer || s.LogIndex < 0 {
		t.Fatalf("signed as %+v (log index %d), want %s from %s", s.Signer, s.LogIndex, c.Identity(), c.Issuer)
	}
	return s.Bundle
}

func githubPolicy(t testing.TB, fs *sigstoretest.Sigstore, mod func(*PolicyOptions)) *Policy {
	t.Helper()
	tr, err := fs.TrustedRoot()
	if err != nil {
		t.Fatal(err)
	}
	o := PolicyOptions{
		CertificateIdentity:   "https://github.com/" + testRepo + "/" + testWorkflow + "@" + testRef,
		CertificateOIDCIssuer: sigstoretest.GitHubIssuer,
		TrustedMaterial:       tr,
	}
	if mod != nil {
		mod(&o)
	}
	p, err := NewPolicy(o)
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	return p
}

func planPredicate(path string) Predicate {
	return Predicate{Kind: KindPlan, Path: path, Repository: testRepo, Ref: testRef, Commit: sigstoretest.GitHubSHA, PullRequest: 42, Approvers: []string{"alice"}}
}

func TestKeylessRoundTrip(t *testing.T) {
	fs := newFake(t)
	claims := sigstoretest.GitHub(testRepo, testWorkflow, testRef)
	before := time.Now().Add(-time.Second).Truncate(time.Second)
	bundle := signKeyless(t, fs, claims, testPlan, planPredicate(testPath))

	cases := []struct {
		name string
		mod  func(*PolicyOptions)
	}{
		{"exact identity", nil},
		{"anchored identity regexp", func(o *PolicyOptions) {
			o.CertificateIdentity = ""
			o.CertificateIdentityRegexp = `https://github\.com/acme/plans/\.github/workflows/[a-z]+\.yml@refs/heads/main`
		}},
		{"issuer regexp", func(o *PolicyOptions) {
			o.CertificateOIDCIssuer = ""
			o.CertificateOIDCIssuerRegexp = `https://token\.actions\.githubusercontent\.com`
		}},
		{"workflow repository and ref", func(o *PolicyOptions) {
			o.GitHubWorkflowRepository = testRepo
			o.GitHubWorkflowRef = testRef
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := githubPolicy(t, fs, tc.mod)
			a, err := p.Verify(context.Background(), VerifyInput{Path: testPath, Content: testPlan, Bundle: bundle})
			if err != nil {
				t.Fatalf("verify: %v", err)
			}
			if a.Kind != KindPlan || a.Path != testPath || a.Digest != Digest(testPlan) {
				t.Errorf("approval = %+v", a)
			}
			if a.Signer.Identity != claims.Identity() || a.Signer.Issuer != sigstoretest.GitHubIssuer ||
				a.Signer.WorkflowRepository != testRepo || a.Signer.WorkflowRef != testRef {
				t.Errorf("signer = %+v", a.Signer)
			}
			if a.Predicate.PullRequest != 42 || a.Predicate.Repository != testRepo || len(a.Predicate.Approvers) != 1 {
				t.Errorf("predicate = %+v", a.Predicate)
			}
			if a.SignedAtSource != "tlog" || a.SignedAt.Before(before) || a.SignedAt.After(time.Now().Add(time.Second)) {
				t.Errorf("signed at %v from %s", a.SignedAt, a.SignedAtSource)
			}
		})
	}
}

func TestKeylessHoldKind(t *testing.T) {
	fs := newFake(t)
	hold := []byte("hold \"h1\" {\n  plan_digest = \"sha256:00\"\n  tool = \"refund_customer\"\n}\n")
	pred := planPredicate("holds/refund-4711/h1.hcl")
	pred.Kind = KindHold
	bundle := signKeyless(t, fs, sigstoretest.GitHub(testRepo, testWorkflow, testRef), hold, pred)
	p := githubPolicy(t, fs, nil)
	a, err := p.Verify(context.Background(), VerifyInput{Path: pred.Path, Content: hold, Bundle: bundle, Kind: KindHold})
	if err != nil {
		t.Fatalf("verify hold: %v", err)
	}
	if a.Kind != KindHold {
		t.Errorf("kind = %s", a.Kind)
	}
	_, err = p.Verify(context.Background(), VerifyInput{Path: pred.Path, Content: hold, Bundle: bundle, Kind: KindPlan})
	if !errors.Is(err, ErrKindMismatch) {
		t.Fatalf("hold bundle verified as a plan: err = %v, want ErrKindMismatch", err)
	}
}

// TestPolicyConcurrentUse: one Policy serves concurrent verifications (the
// proxy re-verifies on file changes while serving); run with -race.
func TestPolicyConcurrentUse(t *testing.T) {
	fs := newFake(t)
	good := signKeyless(t, fs, sigstoretest.GitHub(testRepo, testWorkflow, testRef), testPlan, planPredicate(testPath))
	bad := signKeyless(t, fs, sigstoretest.GitHub("acme/other", testWorkflow, testRef), testPlan, planPredicate(testPath))
	p := githubPolicy(t, fs, nil)
	errs := make(chan error, 16)
	for i := range 16 {
		go func() {
			b, wantOK := good, true
			if i%2 == 1 {
				b, wantOK = bad, false
			}
			_, err := p.Verify(context.Background(), VerifyInput{Path: testPath, Content: testPlan, Bundle: b})
			switch {
			case wantOK && err != nil:
				errs <- err
			case !wantOK && !errors.Is(err, ErrIdentityNotAllowed):
				errs <- fmt.Errorf("other repository: err = %v", err)
			default:
				errs <- nil
			}
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestKeylessWithTimestampAuthority: --tsa-url adds an RFC 3161 timestamp
// that verifies against the trusted root; the Rekor entry is still required
// and its integrated time is still the signing time.
func TestKeylessWithTimestampAuthority(t *testing.T) {
	fs := newFake(t)
	c := sigstoretest.GitHub(testRepo, testWorkflow, testRef)
	s, err := Sign(context.Background(), testPlan, planPredicate(testPath), SignOptions{
		IDToken: c.Token(), FulcioURL: fs.Fulcio.URL, RekorURL: fs.Rekor.URL, TSAURL: fs.TSA.URL,
	})
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	if !strings.Contains(string(s.Bundle), "rfc3161Timestamps") {
		t.Fatal("bundle has no RFC 3161 timestamp")
	}
	p := githubPolicy(t, fs, nil)
	a, err := p.Verify(context.Background(), VerifyInput{Path: testPath, Content: testPlan, Bundle: s.Bundle})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if a.SignedAtSource != "tlog" {
		t.Errorf("signing time from %s, want tlog", a.SignedAtSource)
	}
	var m map[string]any
	if err := json.Unmarshal(s.Bundle, &m); err != nil {
		t.Fatal(err)
	}
	delete(m["verificationMaterial"].(map[string]any), "tlogEntries")
	noTlog, _ := json.Marshal(m)
	if _, err := p.Verify(context.Background(), VerifyInput{Path: testPath, Content: testPlan, Bundle: noTlog}); !errors.Is(err, ErrNoTlogEntry) {
		t.Fatalf("timestamp without log entry: err = %v, want ErrNoTlogEntry", err)
	}
}
