package sign

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"

	"github.com/planlock/planlock/internal/testkit/sigstoretest"
)

// TestWorkflowFlagMatrix: each --certificate-github-workflow-* value is
// checked against the extension the fake Fulcio writes from the token, as
// cosign does; only the extension under test differs from the policy.
func TestWorkflowFlagMatrix(t *testing.T) {
	fs := newFake(t)
	good := sigstoretest.GitHub(testRepo, testWorkflow, testRef)
	broad := func(o *PolicyOptions) {
		o.CertificateIdentity = ""
		o.CertificateIdentityRegexp = `https://github\.com/acme/[a-z-]+/\.github/workflows/sign\.yml@refs/heads/.+`
	}
	pred := func(c sigstoretest.Claims) Predicate {
		p := planPredicate(testPath)
		p.Repository, p.Ref, p.Commit = c.Repository, c.Ref, c.SHA
		return p
	}
	type row struct {
		name   string
		policy func(*PolicyOptions)
		claims func(*sigstoretest.Claims)
		msg    string // "" accepts
	}
	rows := []row{
		{"trigger matches", func(o *PolicyOptions) { o.GitHubWorkflowTrigger = "push" }, nil, ""},
		{"trigger in list", func(o *PolicyOptions) { o.GitHubWorkflowTrigger = "push,schedule" },
			func(c *sigstoretest.Claims) { c.EventName = "schedule" }, ""},
		{"trigger not in list", func(o *PolicyOptions) { o.GitHubWorkflowTrigger = "push,schedule" },
			func(c *sigstoretest.Claims) { c.EventName = "pull_request_target" }, "workflow trigger is pull_request_target, want push,schedule"},
		{"trigger list only for trigger", func(o *PolicyOptions) { o.GitHubWorkflowRef = "refs/heads/main,refs/heads/evil" }, nil, "workflow ref is refs/heads/main, want refs/heads/main,refs/heads/evil"},
		{"trigger differs", func(o *PolicyOptions) { o.GitHubWorkflowTrigger = "push" },
			func(c *sigstoretest.Claims) { c.EventName = "pull_request_target" }, "workflow trigger is pull_request_target, want push"},
		{"sha matches", func(o *PolicyOptions) { o.GitHubWorkflowSHA = sigstoretest.GitHubSHA }, nil, ""},
		{"sha differs", func(o *PolicyOptions) { o.GitHubWorkflowSHA = sigstoretest.GitHubSHA },
			func(c *sigstoretest.Claims) { c.SHA = strings.Repeat("e", 40) }, "workflow sha is eeee"},
		{"name matches", func(o *PolicyOptions) { o.GitHubWorkflowName = "sign" }, nil, ""},
		{"name differs", func(o *PolicyOptions) { o.GitHubWorkflowName = "sign" },
			func(c *sigstoretest.Claims) { c.Workflow = "sign (fork)" }, "workflow name is sign (fork), want sign"},
		{"repository matches", func(o *PolicyOptions) { o.GitHubWorkflowRepository = testRepo }, nil, ""},
		{"repository differs", func(o *PolicyOptions) { o.GitHubWorkflowRepository = testRepo },
			func(c *sigstoretest.Claims) { *c = sigstoretest.GitHub("acme/other", testWorkflow, testRef) }, "workflow repository is acme/other, want acme/plans"},
		{"ref matches", func(o *PolicyOptions) { o.GitHubWorkflowRef = testRef }, nil, ""},
		{"ref differs", func(o *PolicyOptions) { o.GitHubWorkflowRef = testRef },
			func(c *sigstoretest.Claims) { *c = sigstoretest.GitHub(testRepo, testWorkflow, "refs/heads/feature") }, "workflow ref is refs/heads/feature, want refs/heads/main"},
		{"all five match", func(o *PolicyOptions) {
			o.GitHubWorkflowTrigger, o.GitHubWorkflowSHA, o.GitHubWorkflowName = "push", sigstoretest.GitHubSHA, "sign"
			o.GitHubWorkflowRepository, o.GitHubWorkflowRef = testRepo, testRef
		}, nil, ""},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			c := good
			if r.claims != nil {
				r.claims(&c)
			}
			b := signKeyless(t, fs, c, testPlan, pred(c))
			p := githubPolicy(t, fs, func(o *PolicyOptions) { broad(o); r.policy(o) })
			a, err := p.Verify(context.Background(), VerifyInput{Path: testPath, Content: testPlan, Bundle: b})
			if r.msg == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if a.Signer.WorkflowTrigger != c.EventName || a.Signer.WorkflowSHA != c.SHA || a.Signer.WorkflowName != c.Workflow {
					t.Errorf("signer = %+v, want the certificate's workflow fields", a.Signer)
				}
				return
			}
			if !errors.Is(err, ErrIdentityNotAllowed) || !strings.Contains(err.Error(), r.msg) {
				t.Fatalf("err = %v, want ErrIdentityNotAllowed with %q", err, r.msg)
			}
		})
	}
}

// TestPredicateMustMatchCertificate: a keyless approval cannot claim another
// repository, ref or commit than the run its certificate was issued to.
func TestPredicateMustMatchCertificate(t *testing.T) {
	fs := newFake(t)
	good := sigstoretest.GitHub(testRepo, testWorkflow, testRef)
	email := sigstoretest.Claims{Issuer: "https://accounts.example.com", Subject: "alice", Email: "alice@example.com", EmailVerified: true}
	cases := []struct {
		name   string
		claims sigstoretest.Claims
		pred   func(*Predicate)
		msg    string // "" accepts
	}{
		{"all three equal", good, nil, ""},
		{"fields left empty claim nothing", good, func(p *Predicate) { p.Repository, p.Ref, p.Commit = "", "", "" }, ""},
		{"commit in upper case", good, func(p *Predicate) { p.Commit = strings.ToUpper(p.Commit) }, ""},
		{"other repository", good, func(p *Predicate) { p.Repository = "acme/other" }, "the predicate names repository acme/other, the certificate acme/plans"},
		{"other ref", good, func(p *Predicate) { p.Ref = "refs/heads/release" }, "the predicate names ref refs/heads/release, the certificate refs/heads/main"},
		{"other commit", good, func(p *Predicate) { p.Commit = strings.Repeat("0", 40) }, "the predicate names commit 0000000000000000000000000000000000000000, the certificate " + sigstoretest.GitHubSHA},
		{"pull request merge ref", good, func(p *Predicate) { p.Ref = "refs/pull/17/merge" }, "the predicate names ref refs/pull/17/merge"},
		{"certificate without a repository", email, nil, "the predicate names repository acme/plans, the certificate names no repository"},
		{"certificate without a repository, predicate without one", email, func(p *Predicate) { p.Repository, p.Ref, p.Commit = "", "", "" }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pred := planPredicate(testPath)
			if tc.pred != nil {
				tc.pred(&pred)
			}
			b := signKeyless(t, fs, tc.claims, testPlan, pred)
			p := githubPolicy(t, fs, func(o *PolicyOptions) {
				o.CertificateIdentity, o.CertificateOIDCIssuer = tc.claims.Identity(), tc.claims.Issuer
			})
			_, err := p.Verify(context.Background(), VerifyInput{Path: testPath, Content: testPlan, Bundle: b})
			if tc.msg == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrClaimMismatch) || !strings.Contains(err.Error(), tc.msg) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want ErrClaimMismatch with %q", err, tc.msg)
			}
		})
	}
}

// TestWorkflowClaims: each value comes from its v1 (GitHub) or v2 (generic)
// extension; a certificate where both are present and differ is refused.
func TestWorkflowClaims(t *testing.T) {
	cases := []struct {
		name string
		ext  certificate.Extensions
		want workflow
		err  string
	}{
		{"v1 only", certificate.Extensions{GithubWorkflowRepository: "acme/plans", GithubWorkflowRef: "refs/heads/main",
			GithubWorkflowTrigger: "push", GithubWorkflowSHA: "abc", GithubWorkflowName: "sign"},
			workflow{"acme/plans", "refs/heads/main", "push", "abc", "sign"}, ""},
		{"v2 only", certificate.Extensions{SourceRepositoryURI: "https://github.com/acme/plans", SourceRepositoryRef: "refs/heads/main",
			BuildTrigger: "push", SourceRepositoryDigest: "abc"},
			workflow{"acme/plans", "refs/heads/main", "push", "abc", ""}, ""},
		{"both agree", certificate.Extensions{GithubWorkflowRepository: "acme/plans", SourceRepositoryURI: "https://github.com/acme/plans",
			GithubWorkflowTrigger: "push", BuildTrigger: "push"},
			workflow{repository: "acme/plans", trigger: "push"}, ""},
		{"trigger disagrees", certificate.Extensions{GithubWorkflowTrigger: "push", BuildTrigger: "pull_request_target"}, workflow{}, "workflow trigger extensions disagree"},
		{"repository disagrees", certificate.Extensions{GithubWorkflowRepository: "acme/plans", SourceRepositoryURI: "https://github.com/acme/evil"}, workflow{}, "workflow repository extensions disagree"},
		{"sha disagrees", certificate.Extensions{GithubWorkflowSHA: "abc", SourceRepositoryDigest: "def"}, workflow{}, "workflow sha extensions disagree"},
		{"ref disagrees", certificate.Extensions{GithubWorkflowRef: "refs/heads/main", SourceRepositoryRef: "refs/heads/x"}, workflow{}, "workflow ref extensions disagree"},
		{"another forge keeps its URI", certificate.Extensions{SourceRepositoryURI: "https://gitlab.com/acme/plans"}, workflow{repository: "https://gitlab.com/acme/plans"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := workflowClaims(tc.ext)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				if perr := checkPredicateClaims(&Predicate{}, tc.ext, "p.hcl"); !errors.Is(perr, ErrClaimMismatch) {
					t.Errorf("predicate check: err = %v, want ErrClaimMismatch", perr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
