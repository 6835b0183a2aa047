package sign

import (
	"path/filepath"
	"testing"

	"github.com/planlock/planlock/internal/testkit/sigstoretest"
)

// TestPolicyFingerprint: the fingerprint names whom the policy trusts (the
// key, or the certificate identity and issuer matchers) and nothing else,
// since a proxy's state is kept per fingerprint.
func TestPolicyFingerprint(t *testing.T) {
	a := keyPolicy(t, filepath.Join(makeOpensslKey(t, [][]string{{"ecparam", "-genkey", "-name", "prime256v1", "-noout", "-out", "key.pem"}}), "key.pub"))
	b := keyPolicy(t, filepath.Join(makeOpensslKey(t, [][]string{{"ecparam", "-genkey", "-name", "prime256v1", "-noout", "-out", "key.pem"}}), "key.pub"))
	if a.Fingerprint() != "key:"+a.keyID || a.Fingerprint() == b.Fingerprint() {
		t.Fatalf("key fingerprints %q and %q", a.Fingerprint(), b.Fingerprint())
	}
	fs, err := sigstoretest.New()
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	base := githubPolicy(t, fs, nil).Fingerprint()
	cases := []struct {
		name string
		mod  func(*PolicyOptions)
		same bool
	}{
		{"the same options", func(*PolicyOptions) {}, true},
		{"a workflow restriction added", func(o *PolicyOptions) { o.GitHubWorkflowSHA = "0123456789abcdef0123456789abcdef01234567" }, true},
		{"another identity", func(o *PolicyOptions) { o.CertificateIdentity += "x" }, false},
		{"an identity regexp instead", func(o *PolicyOptions) {
			o.CertificateIdentityRegexp, o.CertificateIdentity = o.CertificateIdentity, ""
		}, false},
		{"another issuer", func(o *PolicyOptions) { o.CertificateOIDCIssuer = "https://issuer.example" }, false},
	}
	for _, tc := range cases {
		got := githubPolicy(t, fs, tc.mod).Fingerprint()
		if (got == base) != tc.same {
			t.Errorf("%s: fingerprint %q, base %q, want same=%v", tc.name, got, base, tc.same)
		}
		if got[:len("keyless:")] != "keyless:" {
			t.Errorf("%s: fingerprint %q", tc.name, got)
		}
	}
}
