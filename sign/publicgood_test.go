package sign

import (
	"context"
	"encoding/hex"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
)

// A real bundle made by the public-good sigstore (Fulcio certificate with
// SCT, Rekor entry) for sigstore-js 2.0.0's npm provenance, with the real
// public-good trusted_root.json, both from sigstore-go's test data. It
// verifies offline through planlock's policy (SCTs required, because that
// root lists CT logs), and is then refused as an approval, because it
// approves an npm package, not a planlock file.
const (
	realIdentity = "https://github.com/sigstore/sigstore-js/.github/workflows/release.yml@refs/heads/main"
	realIssuer   = "https://token.actions.githubusercontent.com"
	realDigest   = "46d4e2f74c4877316640000a6fdf8a8b59f1e0847667973e9859f774dd31b8f1e0937813b777fb66a2ac67d50540fe34640966eee9fc2ccca387082b4c85cd3c"
)

func realPolicy(t *testing.T, mod func(*PolicyOptions)) *Policy {
	t.Helper()
	tr, err := LoadTrustedRoot(context.Background(), "testdata/publicgood/trusted_root.json", "")
	if err != nil {
		t.Fatal(err)
	}
	o := PolicyOptions{
		CertificateIdentity:      realIdentity,
		CertificateOIDCIssuer:    realIssuer,
		GitHubWorkflowRepository: "sigstore/sigstore-js",
		GitHubWorkflowRef:        "refs/heads/main",
		TrustedMaterial:          tr,
	}
	if mod != nil {
		mod(&o)
	}
	p, err := NewPolicy(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func realBundle(t *testing.T) ([]byte, *bundle.Bundle) {
	t.Helper()
	data, err := os.ReadFile("testdata/publicgood/sigstore-js-2.0.0-provenance.sigstore.json")
	if err != nil {
		t.Fatal(err)
	}
	var b bundle.Bundle
	if err := b.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	return data, &b
}

func TestRealPublicGoodBundleVerifiesOffline(t *testing.T) {
	tr, _ := LoadTrustedRoot(context.Background(), "testdata/publicgood/trusted_root.json", "")
	if len(tr.(*root.TrustedRoot).CTLogs()) == 0 {
		t.Fatal("public-good root without CT logs: SCT requirement not exercised")
	}
	_, b := realBundle(t)
	digest, _ := hex.DecodeString(realDigest)
	res, err := realPolicy(t, nil).verifySigstore(context.Background(), b, "sigstore-2.0.0.tgz", "sha512", digest)
	if err != nil {
		t.Fatalf("real bundle: %v", err)
	}
	at, src := signingTime(res.VerifiedTimestamps, time.Time{})
	if src != "tlog" || at.Unix() != 1692374735 {
		t.Errorf("signing time = %v (%s), want Rekor's integrated time 1692374735", at, src)
	}

	// Same real bundle, another artifact digest.
	digest[0] ^= 1
	if _, err := realPolicy(t, nil).verifySigstore(context.Background(), b, "sigstore-2.0.0.tgz", "sha512", digest); !errors.Is(err, ErrSignatureInvalid) {
		t.Fatalf("other digest: err = %v", err)
	}
}

func TestRealPublicGoodBundleRefused(t *testing.T) {
	data, b := realBundle(t)
	digest, _ := hex.DecodeString(realDigest)
	cases := []struct {
		name string
		mod  func(*PolicyOptions)
		want error
	}{
		{"another identity", func(o *PolicyOptions) {
			o.CertificateIdentity = "https://github.com/sigstore/sigstore-js/.github/workflows/ci.yml@refs/heads/main"
		}, ErrIdentityNotAllowed},
		{"identity regexp that only matches a prefix", func(o *PolicyOptions) {
			o.CertificateIdentity = ""
			o.CertificateIdentityRegexp = `https://github\.com/sigstore/sigstore-js/`
		}, ErrIdentityNotAllowed},
		{"another issuer", func(o *PolicyOptions) { o.CertificateOIDCIssuer = "https://accounts.google.com" }, ErrIssuerMismatch},
		{"another workflow repository", func(o *PolicyOptions) { o.GitHubWorkflowRepository = "sigstore/cosign" }, ErrIdentityNotAllowed},
		{"another workflow ref", func(o *PolicyOptions) { o.GitHubWorkflowRef = "refs/heads/dev" }, ErrIdentityNotAllowed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := realPolicy(t, tc.mod).verifySigstore(context.Background(), b, "sigstore-2.0.0.tgz", "sha512", digest)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	// As an approval: it is a real, valid bundle, but not a planlock approval.
	_, err := realPolicy(t, nil).Verify(context.Background(), VerifyInput{Path: "plans/x.hcl", Content: []byte("x"), Bundle: data})
	if !errors.Is(err, ErrNotApproval) {
		t.Fatalf("real provenance bundle as an approval: err = %v, want ErrNotApproval", err)
	}
}

// TestRealPublicGoodEmailBundle: a second real public-good bundle (2022,
// bundle v0.1 with a certificate chain, email SAN from GitHub's OAuth
// issuer, intoto Rekor entry) verifies offline for exactly its signer.
func TestRealPublicGoodEmailBundle(t *testing.T) {
	data, err := os.ReadFile("testdata/publicgood/slsa-provenance-0.0.7.sigstore.json")
	if err != nil {
		t.Fatal(err)
	}
	var b bundle.Bundle
	if err := b.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	digest, _ := hex.DecodeString("bbfd372fc9beeb777fe35d05bb10c0c70a9733d366a75fed7dd18866c7391de3ee7e88ba74dd47abf3e15c845e547fcf0e5c3da80854c751554224d3a6d4e55f")
	cases := []struct {
		name string
		mod  func(*PolicyOptions)
		want error
	}{
		{"its signer", nil, nil},
		{"another email", func(o *PolicyOptions) { o.CertificateIdentity = "mallory@dehamer.com" }, ErrIdentityNotAllowed},
		{"regexp matching only the domain", func(o *PolicyOptions) {
			o.CertificateIdentity, o.CertificateIdentityRegexp = "", `dehamer\.com`
		}, ErrIdentityNotAllowed},
		{"whole-value regexp", func(o *PolicyOptions) {
			o.CertificateIdentity, o.CertificateIdentityRegexp = "", `[a-z]+@dehamer\.com`
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := realPolicy(t, func(o *PolicyOptions) {
				o.CertificateIdentity = "brian@dehamer.com"
				o.CertificateOIDCIssuer = "https://github.com/login/oauth"
				o.GitHubWorkflowRepository, o.GitHubWorkflowRef = "", ""
				if tc.mod != nil {
					tc.mod(o)
				}
			})
			_, err := p.verifySigstore(context.Background(), &b, "slsa-provenance-0.0.7.tgz", "sha512", digest)
			if !errors.Is(err, tc.want) && (tc.want != nil || err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}
