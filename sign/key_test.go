package sign

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planlock/planlock/internal/testkit/sigstoretest"
)

// openssl runs the real openssl command in dir.
func openssl(t testing.TB, dir string, args ...string) {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	cmd := exec.Command("openssl", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("openssl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// opensslKeys lists how users make keys with openssl; each writes key.pem.
var opensslKeys = []struct {
	name string
	args [][]string
}{
	{"ecdsa-p256-pkcs8", [][]string{{"genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "key.pem"}}},
	{"ecdsa-p256-sec1-with-params", [][]string{{"ecparam", "-name", "prime256v1", "-genkey", "-out", "key.pem"}}},
	{"ecdsa-p384-pkcs8", [][]string{{"genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", "key.pem"}}},
	{"ecdsa-p384-sec1", [][]string{{"ecparam", "-name", "secp384r1", "-genkey", "-noout", "-out", "key.pem"}}},
	{"ed25519-pkcs8", [][]string{{"genpkey", "-algorithm", "ED25519", "-out", "key.pem"}}},
	{"rsa-2048-pkcs8", [][]string{{"genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "key.pem"}}},
	{"rsa-2048-pkcs1", [][]string{{"genrsa", "-traditional", "-out", "key.pem", "2048"}}},
}

// makeOpensslKey writes key.pem and key.pub in a new directory.
func makeOpensslKey(t testing.TB, args [][]string) string {
	t.Helper()
	dir := t.TempDir()
	for _, a := range args {
		openssl(t, dir, a...)
	}
	openssl(t, dir, "pkey", "-in", "key.pem", "-pubout", "-out", "key.pub")
	return dir
}

func keyPolicy(t testing.TB, pubFile string) *Policy {
	t.Helper()
	data, err := os.ReadFile(pubFile)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ParsePublicKey(data)
	if err != nil {
		t.Fatalf("parse %s: %v", pubFile, err)
	}
	p, err := NewPolicy(PolicyOptions{PublicKey: pub})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func signWithKey(t testing.TB, keyFile string, content []byte, pred Predicate) []byte {
	t.Helper()
	kp, err := LoadSigningKey(context.Background(), keyFile, os.ReadFile)
	if err != nil {
		t.Fatalf("load key: %v", err)
	}
	s, err := Sign(context.Background(), content, pred, SignOptions{Keypair: kp})
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return s.Bundle
}

func TestKeyRoundTripOpensslKeys(t *testing.T) {
	for _, k := range opensslKeys {
		t.Run(k.name, func(t *testing.T) {
			dir := makeOpensslKey(t, k.args)
			bundle := signWithKey(t, filepath.Join(dir, "key.pem"), testPlan, planPredicate(testPath))
			p := keyPolicy(t, filepath.Join(dir, "key.pub"))
			a, err := p.Verify(context.Background(), VerifyInput{Path: testPath, Content: testPlan, Bundle: bundle})
			if err != nil {
				t.Fatalf("verify: %v", err)
			}
			pubPEM, _ := os.ReadFile(filepath.Join(dir, "key.pub"))
			pub, _ := ParsePublicKey(pubPEM)
			id, _ := KeyID(pub)
			if a.Signer.KeyID != id || a.Signer.Identity != "key "+id {
				t.Errorf("signer = %+v, want key %s", a.Signer, id)
			}
			if a.SignedAtSource != "predicate" || !a.SignedAt.Equal(a.Predicate.SignedAt) {
				t.Errorf("signed at %v from %s, want the predicate's %v", a.SignedAt, a.SignedAtSource, a.Predicate.SignedAt)
			}

			// The same bundle against another key of the same type.
			other := makeOpensslKey(t, k.args)
			_, err = keyPolicy(t, filepath.Join(other, "key.pub")).Verify(context.Background(), VerifyInput{Path: testPath, Content: testPlan, Bundle: bundle})
			if !errors.Is(err, ErrKeyMismatch) || !strings.Contains(err.Error(), "not signed by the trusted key sha256:") {
				t.Fatalf("other key: err = %v, want ErrKeyMismatch", err)
			}
		})
	}
}

func TestKeyTamper(t *testing.T) {
	dir := makeOpensslKey(t, opensslKeys[0].args)
	bundle := signWithKey(t, filepath.Join(dir, "key.pem"), testPlan, planPredicate(testPath))
	p := keyPolicy(t, filepath.Join(dir, "key.pub"))

	fs := newFake(t)
	keylessBundle := signKeyless(t, fs, sigstoretest.GitHub(testRepo, testWorkflow, testRef), testPlan, planPredicate(testPath))
	changed := bytes.Replace(testPlan, []byte("4711"), []byte("4711 "), 1)

	cases := []struct {
		name    string
		policy  *Policy
		content []byte
		bundle  []byte
		want    error
		msg     string
	}{
		{"one byte changed", p, changed, bundle, ErrDigestMismatch, "digest mismatch"},
		{"keyless bundle under a key policy", p, testPlan, keylessBundle, ErrKeyMismatch, "the bundle is signed keyless (certificate for https://github.com/acme/plans/"},
		{"key bundle under a keyless policy", githubPolicy(t, fs, nil), testPlan, bundle, ErrKeyMismatch, "the bundle is signed with a key, the policy wants a certificate"},
		{"predicate names another path", p, testPlan, signWithKey(t, filepath.Join(dir, "key.pem"), testPlan, planPredicate("plans/x.hcl")), ErrPathMismatch, `"plans/x.hcl"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.policy.Verify(context.Background(), VerifyInput{Path: testPath, Content: tc.content, Bundle: tc.bundle})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %v containing %q", err, tc.want, tc.msg)
			}
		})
	}
}

func TestParsePrivateKeyRefuses(t *testing.T) {
	dir := t.TempDir()
	openssl(t, dir, "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024", "-out", "small.pem")
	openssl(t, dir, "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-aes-256-cbc", "-pass", "pass:secret", "-out", "enc.pem")
	openssl(t, dir, "ecparam", "-name", "secp256k1", "-genkey", "-noout", "-out", "k1.pem")
	cases := []struct{ file, msg string }{
		{"small.pem", "RSA key of 1024 bits is too small"},
		{"enc.pem", "encrypted private keys are not supported"},
		{"k1.pem", "EC PRIVATE KEY"},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			_, err := LoadSigningKey(context.Background(), filepath.Join(dir, tc.file), os.ReadFile)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %q", err, tc.msg)
			}
		})
	}
	if _, err := ParsePublicKey([]byte("not a key")); err == nil {
		t.Fatal("garbage parsed as a public key")
	}
	priv, _ := os.ReadFile(filepath.Join(dir, "small.pem"))
	if _, err := ParsePublicKey(priv); err == nil || !strings.Contains(err.Error(), "this is a private key") {
		t.Fatalf("private key as public key: err = %v", err)
	}
}

// TestGenerateKeyPairOpenssl: keys planlock makes are read by openssl, and
// openssl derives the same public key.
func TestGenerateKeyPairOpenssl(t *testing.T) {
	for _, kt := range KeyTypes {
		if kt == "rsa-4096" || kt == "rsa-3072" {
			continue // slow to generate; same code path as rsa-2048
		}
		t.Run(kt, func(t *testing.T) {
			priv, pub, err := GenerateKeyPair(kt)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "k.key"), priv, 0o600); err != nil {
				t.Fatal(err)
			}
			openssl(t, dir, "pkey", "-in", "k.key", "-pubout", "-out", "derived.pub")
			derived, _ := os.ReadFile(filepath.Join(dir, "derived.pub"))
			if !bytes.Equal(derived, pub) {
				t.Fatalf("openssl derives\n%s\nplanlock wrote\n%s", derived, pub)
			}
			b := signWithKey(t, filepath.Join(dir, "k.key"), testPlan, planPredicate(testPath))
			if err := os.WriteFile(filepath.Join(dir, "k.pub"), pub, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := keyPolicy(t, filepath.Join(dir, "k.pub")).Verify(context.Background(), VerifyInput{Path: testPath, Content: testPlan, Bundle: b}); err != nil {
				t.Fatalf("verify: %v", err)
			}
		})
	}
	if _, _, err := GenerateKeyPair("dsa"); err == nil {
		t.Fatal("unknown key type accepted")
	}
}

// TestKMSNeverRunsPlugin: an unknown KMS scheme is refused without running
// the sigstore-kms-<scheme> program that kms.Get would look up on $PATH.
func TestKMSNeverRunsPlugin(t *testing.T) {
	bin := t.TempDir()
	marker := filepath.Join(bin, "ran")
	script := "#!/bin/sh\ntouch " + marker + "\nexit 1\n"
	for _, name := range []string{"sigstore-kms-awskms", "sigstore-kms-evil"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	for _, ref := range []string{"awskms:///alias/planlock", "evil://key"} {
		if !IsKMSRef(ref) {
			t.Fatalf("%s not seen as a KMS reference", ref)
		}
		_, err := LoadSigningKey(context.Background(), ref, func(string) ([]byte, error) {
			t.Fatal("KMS reference read as a file")
			return nil, nil
		})
		if err == nil || !strings.Contains(err.Error(), "is not supported") {
			t.Fatalf("%s: err = %v", ref, err)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a sigstore-kms plugin from PATH was executed")
	}
	for _, path := range []string{"keys/k.pem", "./k.pem", `C:\k.pem`, "/abs/k.pem"} {
		if IsKMSRef(path) {
			t.Errorf("%s seen as a KMS reference", path)
		}
	}
}

func TestVerifyFile(t *testing.T) {
	dir := makeOpensslKey(t, opensslKeys[0].args)
	plan := filepath.Join(dir, "plans", "refund.hcl")
	if err := os.MkdirAll(filepath.Dir(plan), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plan, testPlan, 0o644); err != nil {
		t.Fatal(err)
	}
	p := keyPolicy(t, filepath.Join(dir, "key.pub"))
	ctx := context.Background()

	_, _, err := p.VerifyFile(ctx, FileInput{File: plan, Path: testPath})
	if !errors.Is(err, ErrBundleMissing) || !strings.Contains(err.Error(), "refund.hcl.sigstore.json") {
		t.Fatalf("no bundle: err = %v, want ErrBundleMissing naming the bundle file", err)
	}

	b := signWithKey(t, filepath.Join(dir, "key.pem"), testPlan, planPredicate(testPath))
	if err := os.WriteFile(BundlePath(plan), b, 0o644); err != nil {
		t.Fatal(err)
	}
	content, a, err := p.VerifyFile(ctx, FileInput{File: plan, Path: testPath})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(content, testPlan) || a.Digest != Digest(content) {
		t.Fatal("VerifyFile did not return the verified bytes")
	}
	if _, _, err := p.VerifyFile(ctx, FileInput{File: plan, Path: "plans/other.hcl"}); !errors.Is(err, ErrPathMismatch) {
		t.Fatalf("other path: err = %v", err)
	}
}

// TestKeyWithRekor: a key-signed bundle can also be logged in Rekor (the
// fake); it verifies under the key policy with the trusted root that checks
// its log entry, and its signing time is the log's.
func TestKeyWithRekor(t *testing.T) {
	fs := newFake(t)
	dir := makeOpensslKey(t, opensslKeys[4].args) // Ed25519
	kp, err := LoadSigningKey(context.Background(), filepath.Join(dir, "key.pem"), os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Sign(context.Background(), testPlan, planPredicate(testPath), SignOptions{Keypair: kp, RekorURL: fs.Rekor.URL})
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	if s.LogIndex < 0 || !strings.HasPrefix(s.Signer.Identity, "key sha256:") {
		t.Errorf("signed = log index %d, signer %+v", s.LogIndex, s.Signer)
	}
	b := s.Bundle
	if !bytes.Contains(b, []byte(`"tlogEntries"`)) || bytes.Contains(b, []byte(`"certificate"`)) {
		t.Fatalf("want a key bundle with a log entry:\n%s", b)
	}
	p := keyPolicy(t, filepath.Join(dir, "key.pub"))
	if _, err := p.Verify(context.Background(), VerifyInput{Path: testPath, Content: testPlan, Bundle: b}); !errors.Is(err, ErrSignatureInvalid) {
		t.Fatalf("logged bundle without a trusted root: err = %v, want ErrSignatureInvalid", err)
	}
	opts := p.opts
	opts.TrustedMaterial = trustedRoot(t, fs)
	withRoot, err := NewPolicy(opts)
	if err != nil {
		t.Fatal(err)
	}
	a, err := withRoot.Verify(context.Background(), VerifyInput{Path: testPath, Content: testPlan, Bundle: b})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if a.SignedAtSource != "tlog" {
		t.Errorf("signing time from %s, want tlog", a.SignedAtSource)
	}
}
