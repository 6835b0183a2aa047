package sign

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/verify"

	"github.com/planlock/planlock/internal/testkit/sigstoretest"
)

// BenchmarkVerifyKeyless is Policy.Verify of one keyless bundle (policy
// built once, as the proxy does).
func BenchmarkVerifyKeyless(b *testing.B) {
	fs := newFake(b)
	bun := signKeyless(b, fs, sigstoretest.GitHub(testRepo, testWorkflow, testRef), testPlan, planPredicate(testPath))
	p := githubPolicy(b, fs, nil)
	ctx := context.Background()
	for b.Loop() {
		if _, err := p.Verify(ctx, VerifyInput{Path: testPath, Content: testPlan, Bundle: bun}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBareSigstoreGoKeyless is the same bundle through sigstore-go
// alone: parse the bundle, verify with the same verifier options and
// identity, nothing else. Compare with BenchmarkVerifyKeyless.
func BenchmarkBareSigstoreGoKeyless(b *testing.B) {
	fs := newFake(b)
	bun := signKeyless(b, fs, sigstoretest.GitHub(testRepo, testWorkflow, testRef), testPlan, planPredicate(testPath))
	tr, err := fs.TrustedRoot()
	if err != nil {
		b.Fatal(err)
	}
	v, err := verify.NewVerifier(tr, verify.WithTransparencyLog(1), verify.WithObserverTimestamps(1))
	if err != nil {
		b.Fatal(err)
	}
	id, err := verify.NewShortCertificateIdentity(sigstoretest.GitHubIssuer, "", "https://github.com/"+testRepo+"/"+testWorkflow+"@"+testRef, "")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		var pb bundle.Bundle
		if err := pb.UnmarshalJSON(bun); err != nil {
			b.Fatal(err)
		}
		sum := sha256.Sum256(testPlan)
		if _, err := v.Verify(&pb, verify.NewPolicy(verify.WithArtifactDigest("sha256", sum[:]), verify.WithCertificateIdentity(id))); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyKey is Policy.Verify of one bundle signed with an ECDSA
// P-256 key.
func BenchmarkVerifyKey(b *testing.B) {
	priv, pub, err := GenerateKeyPair("ecdsa-p256")
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	keyFile := filepath.Join(dir, "k.key")
	if err := os.WriteFile(keyFile, priv, 0o600); err != nil {
		b.Fatal(err)
	}
	bun := signWithKey(b, keyFile, testPlan, planPredicate(testPath))
	pk, err := ParsePublicKey(pub)
	if err != nil {
		b.Fatal(err)
	}
	p, err := NewPolicy(PolicyOptions{PublicKey: pk})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		if _, err := p.Verify(ctx, VerifyInput{Path: testPath, Content: testPlan, Bundle: bun}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyKeyLogged is Policy.Verify of a key-signed bundle with a
// Rekor entry (fake), checked against the trusted root.
func BenchmarkVerifyKeyLogged(b *testing.B) {
	fs := newFake(b)
	kp, opts := testKeypair(b)
	opts.TrustedMaterial = trustedRoot(b, fs)
	bun := signKeyLogged(b, kp, fs, true, false, testPlan)
	p, err := NewPolicy(opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		if _, err := p.Verify(ctx, VerifyInput{Path: testPath, Content: testPlan, Bundle: bun}); err != nil {
			b.Fatal(err)
		}
	}
}
