package sign

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	sgsign "github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/planlock/planlock/internal/testkit/sigstoretest"
)

// editBundle decodes bundle JSON, lets edit change it, and encodes it again.
func editBundle(t *testing.T, b []byte, edit func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestKeylessTamperMatrix: each row is one way to get a file accepted that
// should not be, and must fail closed with its own error and message.
func TestKeylessTamperMatrix(t *testing.T) {
	fs := newFake(t)
	good := sigstoretest.GitHub(testRepo, testWorkflow, testRef)
	goodBundle := signKeyless(t, fs, good, testPlan, planPredicate(testPath))
	otherPlan := bytes.Replace(testPlan, []byte("4711"), []byte("4712"), 1)

	onePlanByteChanged := bytes.Clone(testPlan)
	onePlanByteChanged[len(onePlanByteChanged)-3] ^= 0x01

	otherIssuer := good
	otherIssuer.Issuer = "https://accounts.example.com"

	holdPred := planPredicate(testPath)
	holdPred.Kind = KindHold

	otherSigstore := newFake(t)

	cases := []struct {
		name    string
		content []byte
		bundle  func() []byte
		mod     func(*PolicyOptions)
		want    error
		msg     string
	}{
		{
			name: "one byte of the plan changed", content: onePlanByteChanged,
			bundle: func() []byte { return goodBundle },
			want:   ErrDigestMismatch, msg: "digest mismatch: the file has sha256",
		},
		{
			name: "bundle of another plan", content: testPlan,
			bundle: func() []byte { return signKeyless(t, fs, good, otherPlan, planPredicate(testPath)) },
			want:   ErrDigestMismatch, msg: "digest mismatch",
		},
		{
			name: "right repository, other branch", content: testPlan,
			bundle: func() []byte {
				return signKeyless(t, fs, sigstoretest.GitHub(testRepo, testWorkflow, "refs/heads/feature"), testPlan, planPredicate(testPath))
			},
			want: ErrIdentityNotAllowed, msg: "identity https://github.com/acme/plans/.github/workflows/sign.yml@refs/heads/feature not allowed by policy",
		},
		{
			name: "other branch under a repository-wide regexp and --certificate-github-workflow-ref", content: testPlan,
			bundle: func() []byte {
				return signKeyless(t, fs, sigstoretest.GitHub(testRepo, testWorkflow, "refs/heads/feature"), testPlan, planPredicate(testPath))
			},
			mod: func(o *PolicyOptions) {
				o.CertificateIdentity = ""
				o.CertificateIdentityRegexp = `https://github\.com/acme/plans/\.github/workflows/sign\.yml@refs/heads/.+`
				o.GitHubWorkflowRef = testRef
			},
			want: ErrIdentityNotAllowed, msg: "workflow ref is refs/heads/feature, want refs/heads/main",
		},
		{
			name: "other repository", content: testPlan,
			bundle: func() []byte {
				return signKeyless(t, fs, sigstoretest.GitHub("acme/other", testWorkflow, testRef), testPlan, planPredicate(testPath))
			},
			want: ErrIdentityNotAllowed, msg: "identity https://github.com/acme/other/",
		},
		{
			name: "other repository under --certificate-github-workflow-repository", content: testPlan,
			bundle: func() []byte {
				return signKeyless(t, fs, sigstoretest.GitHub("acme/other", testWorkflow, testRef), testPlan, planPredicate(testPath))
			},
			mod: func(o *PolicyOptions) {
				o.CertificateIdentity = ""
				o.CertificateIdentityRegexp = `https://github\.com/acme/[a-z]+/\.github/workflows/sign\.yml@refs/heads/main`
				o.GitHubWorkflowRepository = testRepo
			},
			want: ErrIdentityNotAllowed, msg: "workflow repository is acme/other, want acme/plans",
		},
		{
			name: "other workflow file", content: testPlan,
			bundle: func() []byte {
				return signKeyless(t, fs, sigstoretest.GitHub(testRepo, ".github/workflows/evil.yml", testRef), testPlan, planPredicate(testPath))
			},
			want: ErrIdentityNotAllowed, msg: "workflows/evil.yml@refs/heads/main not allowed by policy",
		},
		{
			name: "other OIDC issuer", content: testPlan,
			bundle: func() []byte { return signKeyless(t, fs, otherIssuer, testPlan, planPredicate(testPath)) },
			want:   ErrIssuerMismatch, msg: "OIDC issuer https://accounts.example.com not allowed by policy",
		},
		{
			name: "regexp suffix trick acme/plans-evil", content: testPlan,
			bundle: func() []byte {
				return signKeyless(t, fs, sigstoretest.GitHub("acme/plans-evil", testWorkflow, testRef), testPlan, planPredicate(testPath))
			},
			mod: func(o *PolicyOptions) {
				o.CertificateIdentity = ""
				o.CertificateIdentityRegexp = `https://github\.com/acme/plans`
			},
			want: ErrIdentityNotAllowed, msg: "must match ^(?:https://github\\.com/acme/plans)$",
		},
		{
			name: "regexp prefix trick evil/acme/plans", content: testPlan,
			bundle: func() []byte {
				c := good
				c.JobWorkflowRef = "evil/acme/plans/" + testWorkflow + "@" + testRef
				return signKeyless(t, fs, c, testPlan, planPredicate(testPath))
			},
			mod: func(o *PolicyOptions) {
				o.CertificateIdentity = ""
				// Unanchored, as sigstore-go matches, this accepts any SAN
				// that merely contains it.
				o.CertificateIdentityRegexp = `acme/plans/\.github/workflows/sign\.yml@refs/heads/main`
			},
			want: ErrIdentityNotAllowed, msg: "identity https://github.com/evil/acme/plans/.github/workflows/sign.yml@refs/heads/main not allowed by policy",
		},
		{
			name: "regexp suffix trick on the branch", content: testPlan,
			bundle: func() []byte {
				return signKeyless(t, fs, sigstoretest.GitHub(testRepo, testWorkflow, "refs/heads/main-evil"), testPlan, planPredicate(testPath))
			},
			mod: func(o *PolicyOptions) {
				o.CertificateIdentity = ""
				o.CertificateIdentityRegexp = `https://github\.com/acme/plans/\.github/workflows/sign\.yml@refs/heads/main`
			},
			want: ErrIdentityNotAllowed, msg: "@refs/heads/main-evil not allowed by policy",
		},
		{
			name: "truncated bundle", content: testPlan,
			bundle: func() []byte { return goodBundle[:len(goodBundle)/2] },
			want:   ErrBundleNotJSON, msg: "bundle is not valid JSON",
		},
		{
			name: "bundle is not JSON", content: testPlan,
			bundle: func() []byte { return []byte("-----BEGIN SIGNATURE-----\n") },
			want:   ErrBundleNotJSON, msg: "bundle is not valid JSON",
		},
		{
			name: "JSON that is not a sigstore bundle", content: testPlan,
			bundle: func() []byte { return []byte(`{"mediaType": "application/json", "payload": "x"}`) },
			want:   ErrBundleInvalid, msg: "bundle is not a valid sigstore bundle",
		},
		{
			name: "bundle missing", content: testPlan,
			bundle: func() []byte { return nil },
			want:   ErrBundleMissing, msg: "bundle missing",
		},
		{
			name: "predicate names another path", content: testPlan,
			bundle: func() []byte { return signKeyless(t, fs, good, testPlan, planPredicate("plans/other.hcl")) },
			want:   ErrPathMismatch, msg: `approval names another file: the bundle approves "plans/other.hcl"`,
		},
		{
			name: "hold approval used as a plan", content: testPlan,
			bundle: func() []byte { return signKeyless(t, fs, good, testPlan, holdPred) },
			want:   ErrKindMismatch, msg: "the bundle approves a hold, this file is verified as a plan",
		},
		{
			name: "no transparency log entry", content: testPlan,
			bundle: func() []byte {
				return editBundle(t, goodBundle, func(m map[string]any) {
					delete(m["verificationMaterial"].(map[string]any), "tlogEntries")
				})
			},
			want: ErrNoTlogEntry, msg: "no transparency log entry",
		},
		{
			name: "certificate expired at signing time", content: testPlan,
			bundle: func() []byte {
				fs.SetLogTimeOffset(20 * time.Minute)
				defer fs.SetLogTimeOffset(0)
				return signKeyless(t, fs, good, testPlan, planPredicate(testPath))
			},
			want: ErrCertificateExpired, msg: "certificate expired at signing time: valid",
		},
		{
			name: "certificate not yet valid at signing time", content: testPlan,
			bundle: func() []byte {
				fs.SetLogTimeOffset(-time.Minute)
				defer fs.SetLogTimeOffset(0)
				return signKeyless(t, fs, good, testPlan, planPredicate(testPath))
			},
			want: ErrCertificateExpired, msg: "certificate not yet valid at signing time: valid",
		},
		{
			name: "bundle too large", content: testPlan,
			bundle: func() []byte { return append(bytes.Repeat([]byte(" "), maxBundleSize), goodBundle...) },
			want:   ErrBundleInvalid, msg: "more than 1048576",
		},
		{
			name: "envelope signature altered", content: testPlan,
			bundle: func() []byte {
				return editBundle(t, goodBundle, func(m map[string]any) {
					sigs := m["dsseEnvelope"].(map[string]any)["signatures"].([]any)
					sig := sigs[0].(map[string]any)
					raw, _ := base64.StdEncoding.DecodeString(sig["sig"].(string))
					raw[len(raw)-1] ^= 0xff
					sig["sig"] = base64.StdEncoding.EncodeToString(raw)
				})
			},
			want: ErrSignatureInvalid, msg: "signature does not verify",
		},
		{
			name: "certificate from an untrusted Fulcio", content: testPlan,
			bundle: func() []byte { return signKeyless(t, otherSigstore, good, testPlan, planPredicate(testPath)) },
			want:   ErrSignatureInvalid, msg: "signature does not verify: the transparency log entry is not signed by a trusted log",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := githubPolicy(t, fs, tc.mod)
			a, err := p.Verify(context.Background(), VerifyInput{Path: testPath, Content: tc.content, Bundle: tc.bundle()})
			if err == nil {
				t.Fatalf("verified: %+v", a)
			}
			t.Log(err)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want errors.Is %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %q, want it to contain %q", err, tc.msg)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("err is not one line: %q", err)
			}
			if a != nil {
				t.Errorf("approval returned with error: %+v", a)
			}
		})
	}
}

// TestAnchoringDiffersFromSigstoreGo shows why planlock anchors: sigstore-go's
// own matcher accepts a SAN that merely contains the pattern.
func TestAnchoringDiffersFromSigstoreGo(t *testing.T) {
	evil := certificate.Summary{SubjectAlternativeName: "https://github.com/acme/plans-evil/.github/workflows/sign.yml@refs/heads/main"}
	m, err := verify.NewSANMatcher("", `https://github\.com/acme/plans`)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(evil); err != nil {
		t.Fatalf("sigstore-go's matcher refused it; anchoring test premise changed: %v", err)
	}
	re, err := anchor(`https://github\.com/acme/plans`)
	if err != nil {
		t.Fatal(err)
	}
	if re.MatchString(evil.SubjectAlternativeName) {
		t.Fatal("anchored regexp matched a longer SAN")
	}
	// Alternation must not escape the anchors: ^a|b$ would match "b" anywhere at the end.
	re, _ = anchor(`x|https://github\.com/acme/plans`)
	if re.MatchString(evil.SubjectAlternativeName) || re.MatchString("evil-x") {
		t.Fatal("alternation escaped the anchors")
	}
}

// signStatement signs an arbitrary statement keyless, as a trusted signer
// would if tricked (or a compromised workflow): the planlock checks that
// sigstore-go leaves out must still refuse it.
func signStatement(t *testing.T, fs *sigstoretest.Sigstore, st map[string]any) []byte {
	t.Helper()
	payload, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := sgsign.NewEphemeralKeypair(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := sigstoretest.GitHub(testRepo, testWorkflow, testRef)
	pb, err := sgsign.Bundle(&sgsign.DSSEData{Data: payload, PayloadType: InTotoPayloadType}, kp, sgsign.BundleOptions{
		CertificateProvider:        sgsign.NewFulcio(&sgsign.FulcioOptions{BaseURL: fs.Fulcio.URL}),
		CertificateProviderOptions: &sgsign.CertificateProviderOptions{IDToken: c.Token()},
		TransparencyLogs:           []sgsign.Transparency{sgsign.NewRekor(&sgsign.RekorOptions{BaseURL: fs.Rekor.URL})},
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := protojson.Marshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStatementChecks: sigstore-go's WithArtifactDigest accepts any subject
// whose digest matches and ignores the subject name and predicate type, so
// these bundles pass sigstore-go; planlock refuses each.
func TestStatementChecks(t *testing.T) {
	fs := newFake(t)
	digest := Digest(testPlan)
	pred := map[string]any{"kind": "plan", "path": testPath, "signedAt": "2026-11-30T00:00:00Z"}
	subj := func(name, d string) map[string]any {
		return map[string]any{"name": name, "digest": map[string]any{"sha256": d}}
	}
	stmt := func(subjects []any, ptype string, p any) map[string]any {
		return map[string]any{"_type": StatementType, "subject": subjects, "predicateType": ptype, "predicate": p}
	}
	cases := []struct {
		name string
		st   map[string]any
		want error
		msg  string
	}{
		{"control: a well-formed approval", stmt([]any{subj(testPath, digest)}, PredicateType, pred), nil, ""},
		{"another predicate type", stmt([]any{subj(testPath, digest)}, "https://slsa.dev/provenance/v1", pred), ErrNotApproval, `predicate type is "https://slsa.dev/provenance/v1"`},
		{"a later predicate version", stmt([]any{subj(testPath, digest)}, "https://planlock.dev/approval/v2", pred), ErrNotApproval, "predicate type"},
		{"subject names another file", stmt([]any{subj("plans/other.hcl", digest)}, PredicateType, pred), ErrPathMismatch, `the bundle approves "plans/other.hcl"`},
		{"two subjects", stmt([]any{subj(testPath, digest), subj("plans/other.hcl", Digest([]byte("x")))}, PredicateType, pred), ErrNotApproval, "2 subjects"},
		{"no sha256 digest", stmt([]any{map[string]any{"name": testPath, "digest": map[string]any{"sha512": "00"}}}, PredicateType, pred), ErrNotApproval, "no sha256 subject digest"},
		{"unknown kind", stmt([]any{subj(testPath, digest)}, PredicateType, map[string]any{"kind": "anything", "path": testPath}), ErrNotApproval, `unknown approval kind "anything"`},
		{"predicate is not an object", stmt([]any{subj(testPath, digest)}, PredicateType, "plan"), ErrNotApproval, "predicate"},
		{"not an in-toto statement", map[string]any{"_type": "https://example.com/Other", "subject": []any{subj(testPath, digest)}}, ErrNotApproval, "not an in-toto statement"},
	}
	p := githubPolicy(t, fs, nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Verify(context.Background(), VerifyInput{Path: testPath, Content: testPlan, Bundle: signStatement(t, fs, tc.st)})
			if tc.want == nil {
				if err != nil {
					t.Fatalf("control refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %v containing %q", err, tc.want, tc.msg)
			}
		})
	}
}
