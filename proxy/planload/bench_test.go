package planload

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/planlock/planlock/internal/testkit/sigstoretest"
	"github.com/planlock/planlock/sign"
)

// The cost of loading a plan at start and on each reload: read the file
// once, verify its bundle, parse the same bytes.

func benchRead(b *testing.B, src Source) {
	ctx := context.Background()
	now := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := src.Read(ctx, now); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadUnverified(b *testing.B) {
	file := filepath.Join(b.TempDir(), "refund.hcl")
	writeFile(b, file, []byte(planV2))
	benchRead(b, Source{File: file})
}

func BenchmarkReadKey(b *testing.B) {
	dir := b.TempDir()
	k := opensslKeys(b, dir, "release")
	file := filepath.Join(dir, "refund.hcl")
	writeFile(b, file, []byte(planV2))
	writeFile(b, sign.BundlePath(file), k.signBytes(b, []byte(planV2), "plans/refund.hcl", time.Now()))
	benchRead(b, Source{File: file, Path: "plans/refund.hcl", Policy: k.policy})
}

func BenchmarkReadKeyless(b *testing.B) {
	fs, err := sigstoretest.New()
	if err != nil {
		b.Fatal(err)
	}
	defer fs.Close()
	tr, err := fs.TrustedRoot()
	if err != nil {
		b.Fatal(err)
	}
	claims := sigstoretest.GitHub("acme/plans", ".github/workflows/sign.yml", "refs/heads/main")
	policy, err := sign.NewPolicy(sign.PolicyOptions{CertificateIdentity: claims.Identity(), CertificateOIDCIssuer: sigstoretest.GitHubIssuer, TrustedMaterial: tr})
	if err != nil {
		b.Fatal(err)
	}
	s, err := sign.Sign(context.Background(), []byte(planV2), sign.Predicate{Kind: sign.KindPlan, Path: "plans/refund.hcl"},
		sign.SignOptions{IDToken: claims.Token(), FulcioURL: fs.Fulcio.URL, RekorURL: fs.Rekor.URL})
	if err != nil {
		b.Fatal(err)
	}
	file := filepath.Join(b.TempDir(), "refund.hcl")
	writeFile(b, file, []byte(planV2))
	writeFile(b, sign.BundlePath(file), s.Bundle)
	benchRead(b, Source{File: file, Path: "plans/refund.hcl", Policy: policy})
}

// BenchmarkPoll is one look at an unchanged plan and bundle: what the
// running proxy spends per reload interval.
func BenchmarkPoll(b *testing.B) {
	dir := b.TempDir()
	k := opensslKeys(b, dir, "release")
	file := filepath.Join(dir, "refund.hcl")
	writeFile(b, file, []byte(planV2))
	writeFile(b, sign.BundlePath(file), k.signBytes(b, []byte(planV2), "plans/refund.hcl", time.Now()))
	r := &Reloader{Source: Source{File: file}}
	prev := r.look(filesState{}, true)
	b.ReportAllocs()
	for b.Loop() {
		prev = r.look(prev, false)
	}
}
