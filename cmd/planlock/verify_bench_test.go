package main

import (
	"context"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"

	"github.com/planlock/planlock/internal/testkit/sigstoretest"
	"github.com/planlock/planlock/sign"
)

// verifyBenchSetup signs one plan keyless with the fake sigstore and writes
// plan, bundle and trusted root into a directory.
func verifyBenchSetup(b *testing.B) (dir, identity string) {
	fs, err := sigstoretest.New()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(fs.Close)
	c := sigstoretest.GitHub("acme/plans", ".github/workflows/sign.yml", "refs/heads/main")
	plan := []byte("plan \"bench\" {\n  step \"a\" {\n    tool = \"get_order\"\n  }\n}\n")
	signed, err := sign.Sign(context.Background(), plan, sign.Predicate{Kind: sign.KindPlan, Path: "plan.hcl"},
		sign.SignOptions{IDToken: c.Token(), FulcioURL: fs.Fulcio.URL, RekorURL: fs.Rekor.URL})
	if err != nil {
		b.Fatal(err)
	}
	tr, err := fs.TrustedRootJSON()
	if err != nil {
		b.Fatal(err)
	}
	dir = b.TempDir()
	for name, data := range map[string][]byte{"plan.hcl": plan, "plan.hcl.sigstore.json": signed.Bundle, "trusted_root.json": tr} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir, c.Identity()
}

// BenchmarkVerifyCommand is the whole "planlock verify" command on one plan,
// in process: flags, trusted root file, policy, files, verification, output.
func BenchmarkVerifyCommand(b *testing.B) {
	dir, identity := verifyBenchSetup(b)
	b.Chdir(dir)
	args := []string{"planlock", "verify", "--trusted-root", "trusted_root.json",
		"--certificate-identity", identity, "--certificate-oidc-issuer", sigstoretest.GitHubIssuer, "plan.hcl"}
	s := streams{in: nil, out: io.Discard, err: io.Discard}
	for b.Loop() {
		if code := run(context.Background(), args, s); code != 0 {
			b.Fatalf("exit %d", code)
		}
	}
}

// BenchmarkBareSigstoreGoFiles does what the command does with sigstore-go
// alone: read trusted root, bundle and artifact, build the verifier, verify.
func BenchmarkBareSigstoreGoFiles(b *testing.B) {
	dir, identity := verifyBenchSetup(b)
	for b.Loop() {
		tr, err := root.NewTrustedRootFromPath(filepath.Join(dir, "trusted_root.json"))
		if err != nil {
			b.Fatal(err)
		}
		v, err := verify.NewVerifier(tr, verify.WithTransparencyLog(1), verify.WithObserverTimestamps(1))
		if err != nil {
			b.Fatal(err)
		}
		pb, err := bundle.LoadJSONFromPath(filepath.Join(dir, "plan.hcl.sigstore.json"))
		if err != nil {
			b.Fatal(err)
		}
		plan, err := os.ReadFile(filepath.Join(dir, "plan.hcl"))
		if err != nil {
			b.Fatal(err)
		}
		id, err := verify.NewShortCertificateIdentity(sigstoretest.GitHubIssuer, "", identity, "")
		if err != nil {
			b.Fatal(err)
		}
		sum := sha256.Sum256(plan)
		if _, err := v.Verify(pb, verify.NewPolicy(verify.WithArtifactDigest("sha256", sum[:]), verify.WithCertificateIdentity(id))); err != nil {
			b.Fatal(err)
		}
	}
}
