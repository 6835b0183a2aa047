package sign

import (
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/planlock/planlock/internal/oneline"
)

// PolicyOptions is the operator's trust policy (cosign's flag names). Either
// a key (PublicKey) or a certificate identity (CertificateIdentity or
// CertificateIdentityRegexp, plus CertificateOIDCIssuer or
// CertificateOIDCIssuerRegexp) must be given, never both. Regexps are RE2
// and anchored: they must match the whole value.
type PolicyOptions struct {
	CertificateIdentity         string
	CertificateIdentityRegexp   string
	CertificateOIDCIssuer       string
	CertificateOIDCIssuerRegexp string
	// The GitHub workflow fields must equal the certificate's extensions
	// (cosign's --certificate-github-workflow-* flags): repository
	// ("owner/repo", OID 1.3.6.1.4.1.57264.1.5 or the source repository URI
	// .12), ref ("refs/heads/main", .6 or .14), trigger ("push", or a comma-separated list such as "push,schedule", .2 or .20),
	// sha (the commit, .3 or .13) and name (the workflow's name, .4).
	GitHubWorkflowRepository string
	GitHubWorkflowRef        string
	GitHubWorkflowTrigger    string
	GitHubWorkflowSHA        string
	GitHubWorkflowName       string
	// PublicKey trusts bundles signed by this key (see ParsePublicKey).
	PublicKey crypto.PublicKey
	// TrustedMaterial holds the Fulcio CAs, Rekor and CT log keys and TSAs
	// (see LoadTrustedRoot). Required without PublicKey. With PublicKey it
	// checks the transparency log entries and RFC 3161 timestamps a
	// key-signed bundle carries.
	TrustedMaterial root.TrustedMaterial
	// LoadTrustedMaterial, without TrustedMaterial, loads it on first use
	// (e.g. the public-good root through TUF), so that what can be checked
	// locally (a missing or malformed bundle, a digest) is reported before
	// any network fetch. With PublicKey it is called on the first bundle
	// that carries log entries or timestamps, so a policy for bundles
	// without them needs no network; keyless, on the first bundle that
	// passes the local checks. A failed load is not kept: the next bundle
	// tries again.
	LoadTrustedMaterial func(context.Context) (root.TrustedMaterial, error)
}

// Policy verifies approvals against a trust policy. It is safe for
// concurrent use; build it once with NewPolicy.
type Policy struct {
	opts     PolicyOptions
	keyless  bool
	keyID    string
	sanRE    *regexp.Regexp
	issuerRE *regexp.Regexp
	verifier *verify.Verifier
	identity verify.PolicyOption

	// Key mode: the trusted key as trusted material, and the trusted root
	// for log entries and timestamps, loaded on first use (see
	// PolicyOptions.LoadTrustedMaterial).
	keyMaterial root.TrustedMaterial
	rootMu      sync.Mutex
	logRoot     root.TrustedMaterial

	// Keyless with LoadTrustedMaterial: the verifier, built on first use
	// under verifierMu.
	verifierMu sync.Mutex
}

// VerifyInput is one file to verify.
type VerifyInput struct {
	// Path is the file's path relative to the repository root, as signed.
	Path string
	// Content is the file's exact bytes (read once; parse these same bytes).
	Content []byte
	// Bundle is the bundle JSON; empty means the bundle is missing.
	Bundle []byte
	// Kind is the approval kind expected; empty means KindPlan.
	Kind Kind
}

// Approval is a verified approval.
type Approval struct {
	Path   string `json:"path"`
	Kind   Kind   `json:"kind"`
	Digest string `json:"digest"` // hex sha256 of the content
	// Predicate is the signed predicate, verified to name Path and Kind.
	Predicate Predicate `json:"predicate"`
	Signer    Signer    `json:"signer"`
	// SignedAt is when the approval was signed: the transparency log's
	// integrated time when the bundle has a verified entry, else a verified
	// RFC 3161 timestamp, else the signed predicate's signedAt.
	SignedAt time.Time `json:"signedAt"`
	// SignedAtSource is "tlog", "tsa" or "predicate".
	SignedAtSource string `json:"signedAtSource"`
}

// Signer says who signed: a certificate identity (keyless) or a key.
type Signer struct {
	// Identity is the certificate's SAN, or "key " and the KeyID.
	Identity string `json:"identity"`
	// Issuer is the OIDC issuer of a keyless signer.
	Issuer             string `json:"issuer,omitempty"`
	WorkflowRepository string `json:"workflowRepository,omitempty"`
	WorkflowRef        string `json:"workflowRef,omitempty"`
	WorkflowTrigger    string `json:"workflowTrigger,omitempty"`
	WorkflowSHA        string `json:"workflowSha,omitempty"`
	WorkflowName       string `json:"workflowName,omitempty"`
	// KeyID is set for key-based signatures (see KeyID).
	KeyID string `json:"keyId,omitempty"`
}

// maxBundleSize bounds the bundle JSON; real approval bundles are a few KiB.
const maxBundleSize = 1 << 20

// verifyError is a one-line refusal that wraps one of the Err* sentinels.
type verifyError struct {
	kind error
	msg  string
}

func (e *verifyError) Error() string { return e.msg }
func (e *verifyError) Unwrap() error { return e.kind }

func refuse(kind error, format string, a ...any) error {
	return &verifyError{kind: kind, msg: fmt.Sprintf(format, a...)}
}

// anchor makes a regexp match only the whole value: sigstore-go's matchers
// are unanchored, so "acme/plans" would also accept "evil/acme/plans-evil".
func anchor(re string) (*regexp.Regexp, error) {
	if re == "" {
		return nil, nil
	}
	return regexp.Compile(`^(?:` + re + `)$`)
}

// NewPolicy checks opts and prepares the verifier.
func NewPolicy(opts PolicyOptions) (*Policy, error) {
	p := &Policy{opts: opts}
	idGiven := opts.CertificateIdentity != "" || opts.CertificateIdentityRegexp != ""
	issGiven := opts.CertificateOIDCIssuer != "" || opts.CertificateOIDCIssuerRegexp != ""
	ghGiven := opts.GitHubWorkflowRepository != "" || opts.GitHubWorkflowRef != "" ||
		opts.GitHubWorkflowTrigger != "" || opts.GitHubWorkflowSHA != "" || opts.GitHubWorkflowName != ""
	switch {
	case opts.PublicKey != nil && (idGiven || issGiven || ghGiven):
		return nil, errors.New("give either a key or certificate identity flags, not both")
	case opts.PublicKey != nil:
		return p.initKey()
	case !idGiven && !issGiven:
		return nil, errors.New("no trust policy: give --key, or --certificate-identity (or -regexp) with --certificate-oidc-issuer (or -regexp)")
	case !idGiven:
		return nil, errors.New("--certificate-identity or --certificate-identity-regexp is required with an OIDC issuer")
	case !issGiven:
		return nil, errors.New("--certificate-oidc-issuer or --certificate-oidc-issuer-regexp is required with a certificate identity")
	case opts.TrustedMaterial == nil && opts.LoadTrustedMaterial == nil:
		return nil, errors.New("keyless verification needs trusted material (a trusted root)")
	}
	return p.initKeyless()
}

func (p *Policy) initKey() (*Policy, error) {
	if err := checkKey(p.opts.PublicKey); err != nil {
		return nil, err
	}
	id, err := KeyID(p.opts.PublicKey)
	if err != nil {
		return nil, err
	}
	p.keyID = id
	v, err := signature.LoadDefaultVerifier(p.opts.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("load verifier for key: %w", err)
	}
	key := root.NewExpiringKey(v, time.Time{}, time.Time{})
	// The hint in a bundle is unauthenticated: every bundle is checked against
	// the one trusted key, whatever hint it carries.
	tm := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) { return key, nil })
	p.keyMaterial = tm
	p.logRoot = p.opts.TrustedMaterial
	p.verifier, err = verify.NewVerifier(tm, verify.WithNoObserverTimestamps())
	if err != nil {
		return nil, fmt.Errorf("key verifier: %w", err)
	}
	p.identity = verify.WithKey()
	return p, nil
}

func (p *Policy) initKeyless() (*Policy, error) {
	var err error
	o := p.opts
	p.keyless = true
	if p.sanRE, err = anchor(o.CertificateIdentityRegexp); err != nil {
		return nil, fmt.Errorf("--certificate-identity-regexp: %w", err)
	}
	if p.issuerRE, err = anchor(o.CertificateOIDCIssuerRegexp); err != nil {
		return nil, fmt.Errorf("--certificate-oidc-issuer-regexp: %w", err)
	}
	san := verify.SubjectAlternativeNameMatcher{SubjectAlternativeName: o.CertificateIdentity}
	if p.sanRE != nil {
		san.Regexp = *p.sanRE
	}
	iss := verify.IssuerMatcher{Issuer: o.CertificateOIDCIssuer}
	if p.issuerRE != nil {
		iss.Regexp = *p.issuerRE
	}
	id, err := verify.NewCertificateIdentity(san, iss, certificate.Extensions{})
	if err != nil {
		return nil, fmt.Errorf("certificate identity: %w", err)
	}
	p.identity = verify.WithCertificateIdentity(id)
	if o.TrustedMaterial == nil {
		return p, nil // built on first use (keylessVerifier)
	}
	if p.verifier, err = newKeylessVerifier(o.TrustedMaterial); err != nil {
		return nil, err
	}
	return p, nil
}

func newKeylessVerifier(tm root.TrustedMaterial) (*verify.Verifier, error) {
	vopts := []verify.VerifierOption{verify.WithTransparencyLog(1), verify.WithObserverTimestamps(1)}
	// Public-good and real private instances publish CT logs: then every
	// certificate must carry an SCT, as cosign requires.
	if len(tm.CTLogs()) > 0 {
		vopts = append(vopts, verify.WithSignedCertificateTimestamps(1))
	}
	v, err := verify.NewVerifier(tm, vopts...)
	if err != nil {
		return nil, fmt.Errorf("keyless verifier: %w", err)
	}
	return v, nil
}

// keylessVerifier is the keyless verifier, loading the trusted material
// on first use (PolicyOptions.LoadTrustedMaterial).
func (p *Policy) keylessVerifier(ctx context.Context, path string) (*verify.Verifier, error) {
	p.verifierMu.Lock()
	defer p.verifierMu.Unlock()
	if p.verifier != nil {
		return p.verifier, nil
	}
	tm, err := p.opts.LoadTrustedMaterial(ctx)
	if err != nil {
		return nil, refuse(ErrTrustedRootUnavailable, "%s: %s", path, trustedRootHint(err))
	}
	v, err := newKeylessVerifier(tm)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	p.verifier = v
	return v, nil
}

// trustedRootHint says on one line which trusted root could not be loaded
// and how to verify without fetching it.
func trustedRootHint(err error) string {
	return oneline.Of(err.Error(), 0) + "; to verify offline or against a private sigstore, give --trusted-root FILE (a sigstore trusted_root.json)"
}

// Fingerprint names whom the policy trusts, for keying what is kept per
// trust policy (a proxy's state, its no-downgrade marks): "key:" and the
// key's id, or "keyless:" and the sha256 of the certificate identity and
// issuer matchers. The GitHub workflow restrictions and the trusted root
// are left out on purpose: they narrow the same signer (a workflow sha
// changes with every commit), and a rotated root must not start a new
// state.
func (p *Policy) Fingerprint() string {
	if !p.keyless {
		return "key:" + p.keyID
	}
	o := p.opts
	b, _ := json.Marshal([]string{o.CertificateIdentity, o.CertificateIdentityRegexp, o.CertificateOIDCIssuer, o.CertificateOIDCIssuerRegexp})
	sum := sha256.Sum256(b)
	return "keyless:" + hex.EncodeToString(sum[:])
}

// Describe says in one line what the policy trusts.
func (p *Policy) Describe() string {
	if !p.keyless {
		return "key " + p.keyID
	}
	o := p.opts
	var parts []string
	if o.CertificateIdentity != "" {
		parts = append(parts, "identity "+o.CertificateIdentity)
	}
	if p.sanRE != nil {
		parts = append(parts, "identity matching "+p.sanRE.String())
	}
	if o.CertificateOIDCIssuer != "" {
		parts = append(parts, "issuer "+o.CertificateOIDCIssuer)
	}
	if p.issuerRE != nil {
		parts = append(parts, "issuer matching "+p.issuerRE.String())
	}
	if o.GitHubWorkflowRepository != "" {
		parts = append(parts, "workflow repository "+o.GitHubWorkflowRepository)
	}
	if o.GitHubWorkflowRef != "" {
		parts = append(parts, "workflow ref "+o.GitHubWorkflowRef)
	}
	if o.GitHubWorkflowTrigger != "" {
		parts = append(parts, "workflow trigger "+o.GitHubWorkflowTrigger)
	}
	if o.GitHubWorkflowSHA != "" {
		parts = append(parts, "workflow sha "+o.GitHubWorkflowSHA)
	}
	if o.GitHubWorkflowName != "" {
		parts = append(parts, "workflow name "+o.GitHubWorkflowName)
	}
	return strings.Join(parts, ", ")
}

// Verify checks that in.Bundle is a valid approval of exactly in.Content at
// in.Path, of kind in.Kind, signed by a signer the policy trusts. Every
// error wraps one of the Err* values of this package.
func (p *Policy) Verify(ctx context.Context, in VerifyInput) (*Approval, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	path, err := CleanPath(in.Path)
	if err != nil {
		return nil, refuse(ErrPathMismatch, "%s: %v", in.Path, err)
	}
	kind := in.Kind
	if kind == "" {
		kind = KindPlan
	}
	if _, err := ParseKind(string(kind)); err != nil {
		return nil, refuse(ErrKindMismatch, "%s: %v", path, err)
	}
	if len(in.Bundle) == 0 {
		return nil, refuse(ErrBundleMissing, "%s: bundle missing (sign it with planlock sign, or give --bundle)", path)
	}
	if len(in.Bundle) > maxBundleSize {
		return nil, refuse(ErrBundleInvalid, "%s: bundle is not a valid sigstore bundle: %d bytes, more than %d", path, len(in.Bundle), maxBundleSize)
	}
	if !json.Valid(in.Bundle) {
		return nil, refuse(ErrBundleNotJSON, "%s: bundle is not valid JSON (truncated, or not a sigstore bundle)", path)
	}
	var b bundle.Bundle
	if err := b.UnmarshalJSON(in.Bundle); err != nil {
		return nil, refuse(ErrBundleInvalid, "%s: bundle is not a valid sigstore bundle: %s", path, oneline.Of(err.Error(), 0))
	}
	env := b.GetDsseEnvelope()
	if env == nil {
		return nil, refuse(ErrNotApproval, "%s: bundle signs a bare message, not an approval statement", path)
	}
	if env.GetPayloadType() != InTotoPayloadType {
		return nil, refuse(ErrNotApproval, "%s: bundle payload type is %q, not an in-toto statement", path, env.GetPayloadType())
	}
	st, err := parseStatement(env.GetPayload())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(st.Subject) != 1 {
		return nil, refuse(ErrNotApproval, "%s: approval statement has %d subjects, want exactly 1", path, len(st.Subject))
	}
	digest := Digest(in.Content)
	signed := strings.ToLower(st.Subject[0].Digest["sha256"])
	if signed == "" {
		return nil, refuse(ErrNotApproval, "%s: approval statement has no sha256 subject digest", path)
	}
	if signed != digest {
		return nil, refuse(ErrDigestMismatch, "%s: digest mismatch: the file has sha256 %s, the bundle approves sha256 %s", path, short(digest), short(signed))
	}
	raw, _ := hex.DecodeString(digest)
	res, err := p.verifySigstore(ctx, &b, path, "sha256", raw)
	if err != nil {
		return nil, err
	}
	// WithArtifactDigest accepts any subject with a matching digest and looks
	// at neither the subject name nor the predicate: check both.
	if name := st.Subject[0].Name; name != path {
		return nil, refuse(ErrPathMismatch, "%s: approval names another file: the bundle approves %q", path, name)
	}
	pred, err := st.predicate()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if pred.Path != path {
		return nil, refuse(ErrPathMismatch, "%s: approval names another file: the predicate approves %q", path, pred.Path)
	}
	if pred.Kind != kind {
		return nil, refuse(ErrKindMismatch, "%s: wrong approval kind: the bundle approves a %s, this file is verified as a %s", path, pred.Kind, kind)
	}
	a := &Approval{Path: path, Kind: kind, Digest: digest, Predicate: *pred}
	if p.keyless {
		if res.Signature == nil || res.Signature.Certificate == nil {
			return nil, refuse(ErrKeyMismatch, "%s: key mismatch: verified bundle has no certificate", path)
		}
		sum := *res.Signature.Certificate
		if err := p.checkIdentity(sum, path); err != nil {
			return nil, err
		}
		if err := checkPredicateClaims(pred, sum.Extensions, path); err != nil {
			return nil, err
		}
		a.Signer = signerOf(sum)
	} else {
		a.Signer = Signer{Identity: "key " + p.keyID, KeyID: p.keyID}
	}
	a.SignedAt, a.SignedAtSource = signingTime(res.VerifiedTimestamps, pred.SignedAt)
	return a, nil
}

// verifySigstore runs sigstore-go's verification of b for an artifact
// digest, under the policy's identity or key.
func (p *Policy) verifySigstore(ctx context.Context, b *bundle.Bundle, path, alg string, digest []byte) (*verify.VerificationResult, error) {
	// Cheap checks on the (not yet verified) signer give a precise reason;
	// they can only refuse. Acceptance needs the full verification below.
	if err := p.checkSignerMaterial(b, path); err != nil {
		return nil, err
	}
	var v *verify.Verifier
	var err error
	if p.keyless {
		v, err = p.keylessVerifier(ctx, path)
	} else {
		v, err = p.keyLogVerifier(ctx, b, path)
	}
	if err != nil {
		return nil, err
	}
	res, err := v.Verify(b, verify.NewPolicy(verify.WithArtifactDigest(alg, digest), p.identity))
	if err != nil {
		return nil, p.explain(b, path, err)
	}
	return res, nil
}

// keyLogVerifier returns the verifier for a key-signed bundle. Without log
// entries or timestamps it is the key alone, and the signing time is the
// signer's claim. With them, every entry and every timestamp the bundle
// carries must verify against the trusted root (sigstore-go alone skips
// the ones it cannot verify once its threshold is met), so a planted entry
// or timestamp can never lend its time to a bundle.
func (p *Policy) keyLogVerifier(ctx context.Context, b *bundle.Bundle, path string) (*verify.Verifier, error) {
	vm := b.GetVerificationMaterial()
	entries := vm.GetTlogEntries()
	stamps := vm.GetTimestampVerificationData().GetRfc3161Timestamps()
	if len(entries) == 0 && len(stamps) == 0 {
		return p.verifier, nil
	}
	what := describeLogMaterial(len(entries), len(stamps))
	tm, err := p.trustedRoot(ctx)
	if err != nil {
		return nil, refuse(ErrSignatureInvalid, "%s: signature does not verify: the bundle carries %s, and the trusted root to check it could not be loaded: %s", path, what, trustedRootHint(err))
	}
	if tm == nil {
		return nil, refuse(ErrSignatureInvalid, "%s: signature does not verify: the bundle carries %s, but the policy has no trusted root to check it (give --trusted-root)", path, what)
	}
	logs := map[string]bool{}
	promised := 0
	for _, e := range entries {
		logs[string(e.GetLogId().GetKeyId())] = true
		if e.GetInclusionPromise() != nil {
			promised++
		}
	}
	if len(logs) != len(entries) {
		return nil, refuse(ErrSignatureInvalid, "%s: signature does not verify: the bundle carries %d transparency log entries from %d log(s); want at most one per log", path, len(entries), len(logs))
	}
	var opts []verify.VerifierOption
	if len(entries) > 0 {
		opts = append(opts, verify.WithTransparencyLog(len(entries)))
		if promised > 0 {
			opts = append(opts, verify.WithIntegratedTimestamps(promised))
		}
	}
	if len(stamps) > 0 {
		opts = append(opts, verify.WithSignedTimestamps(len(stamps)))
	}
	if promised == 0 && len(stamps) == 0 {
		// Log entries without a signed time (inclusion proof only): the
		// entries are still verified; the key has no validity window.
		opts = append(opts, verify.WithCurrentTime())
	}
	v, err := verify.NewVerifier(root.TrustedMaterialCollection{p.keyMaterial, tm}, opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: key verifier with log material: %w", path, err)
	}
	return v, nil
}

func describeLogMaterial(entries, stamps int) string {
	var parts []string
	if entries > 0 {
		parts = append(parts, plural(entries, "a transparency log entry", "transparency log entries"))
	}
	if stamps > 0 {
		parts = append(parts, plural(stamps, "an RFC 3161 timestamp", "RFC 3161 timestamps"))
	}
	return strings.Join(parts, " and ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// trustedRoot returns the trusted material for a key-signed bundle's log
// entries and timestamps, loading it on first use; nil when there is none.
func (p *Policy) trustedRoot(ctx context.Context) (root.TrustedMaterial, error) {
	p.rootMu.Lock()
	defer p.rootMu.Unlock()
	if p.logRoot != nil || p.opts.LoadTrustedMaterial == nil {
		return p.logRoot, nil
	}
	tm, err := p.opts.LoadTrustedMaterial(ctx)
	if err != nil {
		return nil, err
	}
	p.logRoot = tm
	return tm, nil
}

// signingTime picks the most trustworthy signing time.
func signingTime(ts []verify.TimestampVerificationResult, predicate time.Time) (time.Time, string) {
	var tlog, tsa time.Time
	for _, t := range ts {
		switch t.Type {
		case "Tlog":
			if tlog.IsZero() || t.Timestamp.Before(tlog) {
				tlog = t.Timestamp
			}
		case "TimestampAuthority":
			if tsa.IsZero() || t.Timestamp.Before(tsa) {
				tsa = t.Timestamp
			}
		}
	}
	switch {
	case !tlog.IsZero():
		return tlog.UTC(), "tlog"
	case !tsa.IsZero():
		return tsa.UTC(), "tsa"
	}
	return predicate.UTC(), "predicate"
}

// checkSignerMaterial refuses a bundle whose signer cannot satisfy the policy.
func (p *Policy) checkSignerMaterial(b *bundle.Bundle, path string) error {
	vc, err := b.VerificationContent()
	if err != nil {
		return refuse(ErrBundleInvalid, "%s: bundle is not a valid sigstore bundle: %s", path, oneline.Of(err.Error(), 0))
	}
	cert := vc.Certificate()
	if !p.keyless {
		if cert != nil {
			return refuse(ErrKeyMismatch, "%s: key mismatch: the bundle is signed keyless (certificate for %s), the policy trusts only %s", path, sanOf(cert), p.Describe())
		}
		return nil
	}
	if cert == nil {
		return refuse(ErrKeyMismatch, "%s: key mismatch: the bundle is signed with a key, the policy wants a certificate for %s", path, p.Describe())
	}
	sum, err := certificate.SummarizeCertificate(cert)
	if err != nil {
		return refuse(ErrSignatureInvalid, "%s: signature does not verify: certificate: %s", path, oneline.Of(err.Error(), 0))
	}
	return p.checkIdentity(sum, path)
}

// checkIdentity applies the keyless policy to a certificate summary.
func (p *Policy) checkIdentity(sum certificate.Summary, path string) error {
	o := p.opts
	san := sum.SubjectAlternativeName
	if o.CertificateIdentity != "" && san != o.CertificateIdentity {
		return refuse(ErrIdentityNotAllowed, "%s: identity %s not allowed by policy (want %s)", path, san, o.CertificateIdentity)
	}
	if p.sanRE != nil && !p.sanRE.MatchString(san) {
		return refuse(ErrIdentityNotAllowed, "%s: identity %s not allowed by policy (must match %s)", path, san, p.sanRE)
	}
	iss := sum.Issuer
	if o.CertificateOIDCIssuer != "" && iss != o.CertificateOIDCIssuer {
		return refuse(ErrIssuerMismatch, "%s: OIDC issuer %s not allowed by policy (want %s)", path, orNone(iss), o.CertificateOIDCIssuer)
	}
	if p.issuerRE != nil && !p.issuerRE.MatchString(iss) {
		return refuse(ErrIssuerMismatch, "%s: OIDC issuer %s not allowed by policy (must match %s)", path, orNone(iss), p.issuerRE)
	}
	wf, err := workflowClaims(sum.Extensions)
	if err != nil {
		return refuse(ErrIdentityNotAllowed, "%s: identity %s not allowed by policy: %v", path, san, err)
	}
	for _, c := range []struct{ name, want, got string }{
		{"repository", o.GitHubWorkflowRepository, wf.repository},
		{"ref", o.GitHubWorkflowRef, wf.ref},
		{"trigger", o.GitHubWorkflowTrigger, wf.trigger},
		{"sha", o.GitHubWorkflowSHA, wf.sha},
		{"name", o.GitHubWorkflowName, wf.name},
	} {
		if c.want != "" && !oneOf(c.got, c.want, c.name == "trigger") {
			return refuse(ErrIdentityNotAllowed, "%s: identity %s not allowed by policy: workflow %s is %s, want %s", path, san, c.name, orNone(c.got), c.want)
		}
	}
	return nil
}

// oneOf reports whether got is want, or, for a list (the trigger: event
// names have no commas), one of the comma-separated names in want: the
// signing workflow runs on push and on its schedule, both on the protected
// branch with its code.
func oneOf(got, want string, list bool) bool {
	if !list {
		return got == want
	}
	for _, w := range strings.Split(want, ",") {
		if w != "" && got == strings.TrimSpace(w) {
			return true
		}
	}
	return false
}

// workflow is what a Fulcio certificate says about the CI run that signed.
type workflow struct {
	repository, ref, trigger, sha, name string
}

// workflowClaims reads the workflow from the certificate extensions: each
// value from its GitHub-specific (v1) extension or its generic (v2) one.
// Fulcio writes both alike; a certificate where they differ is refused
// rather than one of them believed.
func workflowClaims(e certificate.Extensions) (workflow, error) {
	var w workflow
	var err error
	pick := func(name, v1, v2 string) string {
		if err == nil && v1 != "" && v2 != "" && v1 != v2 {
			err = fmt.Errorf("the certificate's workflow %s extensions disagree (%s and %s)", name, v1, v2)
		}
		if v1 != "" {
			return v1
		}
		return v2
	}
	w.repository = pick("repository", e.GithubWorkflowRepository, githubRepo(e.SourceRepositoryURI))
	w.ref = pick("ref", e.GithubWorkflowRef, e.SourceRepositoryRef)
	w.trigger = pick("trigger", e.GithubWorkflowTrigger, e.BuildTrigger)
	w.sha = pick("sha", e.GithubWorkflowSHA, e.SourceRepositoryDigest)
	w.name = e.GithubWorkflowName // no v2 form: build config URI names the file, not the workflow
	return w, err
}

// githubRepo turns a source repository URI into "owner/repo" for GitHub;
// other forges keep their URI.
func githubRepo(uri string) string {
	return strings.TrimPrefix(uri, "https://github.com/")
}

// signerOf describes a verified certificate's signer.
func signerOf(sum certificate.Summary) Signer {
	w, _ := workflowClaims(sum.Extensions)
	return Signer{
		Identity:           sum.SubjectAlternativeName,
		Issuer:             sum.Issuer,
		WorkflowRepository: w.repository,
		WorkflowRef:        w.ref,
		WorkflowTrigger:    w.trigger,
		WorkflowSHA:        w.sha,
		WorkflowName:       w.name,
	}
}

// checkPredicateClaims refuses a keyless approval whose predicate names
// another repository, ref or commit than the certificate of the run that
// signed it: the workflow may write anything into the predicate, the
// certificate says where it really ran. A field the predicate leaves empty
// claims nothing.
func checkPredicateClaims(pred *Predicate, e certificate.Extensions, path string) error {
	w, err := workflowClaims(e)
	if err != nil {
		return refuse(ErrClaimMismatch, "%s: approval contradicts its certificate: %v", path, err)
	}
	for _, c := range []struct {
		name, claimed, cert string
		fold                bool
	}{
		{"repository", pred.Repository, w.repository, false},
		{"ref", pred.Ref, w.ref, false},
		{"commit", pred.Commit, w.sha, true},
	} {
		if c.claimed == "" {
			continue
		}
		if c.cert == "" {
			return refuse(ErrClaimMismatch, "%s: approval contradicts its certificate: the predicate names %s %s, the certificate names no %s", path, c.name, c.claimed, c.name)
		}
		if c.claimed != c.cert && !(c.fold && strings.EqualFold(c.claimed, c.cert)) {
			return refuse(ErrClaimMismatch, "%s: approval contradicts its certificate: the predicate names %s %s, the certificate %s", path, c.name, c.claimed, c.cert)
		}
	}
	return nil
}

// explain turns a sigstore-go failure into one of the package's errors.
func (p *Policy) explain(b *bundle.Bundle, path string, err error) error {
	tlogs := b.GetVerificationMaterial().GetTlogEntries()
	if p.keyless && len(tlogs) == 0 {
		return refuse(ErrNoTlogEntry, "%s: no transparency log entry: keyless approvals must be logged in Rekor", path)
	}
	if vc, vErr := b.VerificationContent(); vErr == nil {
		if cert := vc.Certificate(); cert != nil {
			for _, e := range tlogs {
				t := time.Unix(e.GetIntegratedTime(), 0).UTC()
				if e.GetIntegratedTime() == 0 {
					continue
				}
				what := ""
				switch {
				case t.After(cert.NotAfter):
					what = "certificate expired at signing time"
				case t.Before(cert.NotBefore):
					what = "certificate not yet valid at signing time"
				default:
					continue
				}
				return refuse(ErrCertificateExpired, "%s: %s: valid %s to %s, signature logged at %s", path, what,
					cert.NotBefore.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339), t.Format(time.RFC3339))
			}
		}
	}
	if !p.keyless && strings.Contains(err.Error(), "failed to verify signature") {
		return refuse(ErrKeyMismatch, "%s: key mismatch: the bundle is not signed by the trusted key %s", path, p.keyID)
	}
	var idErr *verify.ErrNoMatchingCertificateIdentity
	if errors.As(err, &idErr) {
		return refuse(ErrIdentityNotAllowed, "%s: identity not allowed by policy: %s", path, oneline.Of(err.Error(), 0))
	}
	msg := oneline.Of(err.Error(), 0)
	switch {
	case strings.Contains(msg, "not enough verified log entries"):
		msg = "the transparency log entry is not signed by a trusted log (" + msg + ")"
	case strings.Contains(msg, "failed to verify timestamps"):
		msg = "a timestamp is not signed by a trusted timestamp authority for this signature (" + msg + ")"
	case strings.Contains(msg, "failed to verify leaf certificate"):
		msg = "the certificate is not issued by a trusted certificate authority (" + msg + ")"
	}
	return refuse(ErrSignatureInvalid, "%s: signature does not verify: %s", path, msg)
}

func sanOf(cert *x509.Certificate) string {
	if sum, err := certificate.SummarizeCertificate(cert); err == nil {
		return sum.SubjectAlternativeName
	}
	return "an unknown identity"
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// short abbreviates a hex digest for messages.
func short(d string) string {
	if len(d) > 16 {
		return d[:16] + "…"
	}
	return d
}
