package planload

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/planlock/planlock/internal/testkit/sigstoretest"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/sign"
)

var t0 = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

func TestReadParsesExactlyTheVerifiedBytes(t *testing.T) {
	dir := t.TempDir()
	k := opensslKeys(t, dir, "release")
	file := filepath.Join(dir, "refund.hcl")
	writeFile(t, file, []byte(planV1))
	writeFile(t, sign.BundlePath(file), k.signBytes(t, []byte(planV1), "plans/refund.hcl", t0))
	l, err := Source{File: file, Path: "plans/refund.hcl", Policy: k.policy}.Read(context.Background(), t0)
	if err != nil {
		t.Fatal(err)
	}
	if l.Plan.Name != "refund" || l.Plan.Digest != "sha256:"+l.Approval.Digest || l.Plan.Digest != "sha256:"+sign.Digest([]byte(planV1)) {
		t.Fatalf("parsed %q %s, verified %s", l.Plan.Name, l.Plan.Digest, l.Approval.Digest)
	}
	if !l.Approval.SignedAt.Equal(t0) || l.Approval.SignedAtSource != "predicate" {
		t.Fatalf("signed at %s (%s)", l.Approval.SignedAt, l.Approval.SignedAtSource)
	}
	if d := l.Describe(); !strings.HasPrefix(d, `plan "refund" (sha256:`) || !strings.Contains(d, "signed by key sha256:") {
		t.Fatalf("describe: %q", d)
	}
}

func TestReadRefusals(t *testing.T) {
	dir := t.TempDir()
	k := opensslKeys(t, dir, "release")
	other := opensslKeys(t, dir, "other")
	good := k.signBytes(t, []byte(planV1), "plans/refund.hcl", t0)
	expired := strings.Replace(planV1, `goal  =`, "expires = \"2026-11-01T09:00:00Z\"\n  goal  =", 1)
	cases := []struct {
		name   string
		plan   string
		bundle []byte // nil: no bundle file
		policy *sign.Policy
		want   []error
		line   string // the error, as a regexp-free substring
	}{
		{"unsigned", planV1, nil, k.policy, []error{ErrNotVerified, sign.ErrBundleMissing},
			"refused: plans/refund.hcl: bundle missing: no "},
		{"one byte changed", strings.Replace(planV1, "4711", "4712", 1), good, k.policy, []error{ErrNotVerified, sign.ErrDigestMismatch},
			"refused: plans/refund.hcl: digest mismatch: the file has sha256 "},
		{"bundle of another plan", planV1, k.signBytes(t, []byte(planV2), "plans/refund.hcl", t0), k.policy, []error{ErrNotVerified, sign.ErrDigestMismatch},
			"digest mismatch"},
		{"bundle for another path", planV1, k.signBytes(t, []byte(planV1), "plans/other.hcl", t0), k.policy, []error{ErrNotVerified, sign.ErrPathMismatch},
			`approval names another file: the bundle approves "plans/other.hcl"`},
		{"another key", planV1, good, other.policy, []error{ErrNotVerified, sign.ErrKeyMismatch},
			"key mismatch: the bundle is not signed by the trusted key"},
		{"truncated bundle", planV1, good[:len(good)/2], k.policy, []error{ErrNotVerified, sign.ErrBundleNotJSON},
			"bundle is not valid JSON"},
		{"expired", expired, k.signBytes(t, []byte(expired), "plans/refund.hcl", t0), k.policy, []error{ErrExpired},
			`plan "refund" expired at 2026-11-01T09:00:00Z; refusing to load it (to renew it, sign a new plan with a later expires)`},
		{"signed but not a plan", "plan {", k.signBytes(t, []byte("plan {"), "plans/refund.hcl", t0), k.policy, []error{ErrInvalid},
			"refund.hcl is not valid: "},
		{"insecure, not a plan", "plan {", nil, nil, []error{ErrInvalid}, "is not valid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "refund.hcl")
			writeFile(t, file, []byte(c.plan))
			if c.bundle != nil {
				writeFile(t, sign.BundlePath(file), c.bundle)
			}
			l, err := Source{File: file, Path: "plans/refund.hcl", Policy: c.policy}.Read(context.Background(), t0)
			if err == nil {
				t.Fatalf("loaded %s", l.Describe())
			}
			for _, w := range c.want {
				if !errors.Is(err, w) {
					t.Errorf("error %q is not %v", err, w)
				}
			}
			if !strings.Contains(err.Error(), c.line) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q, want one line containing %q", err, c.line)
			}
		})
	}
}

func TestReadInsecureNeedsNoBundle(t *testing.T) {
	file := filepath.Join(t.TempDir(), "refund.hcl")
	writeFile(t, file, []byte(planV1))
	l, err := Source{File: file}.Read(context.Background(), t0)
	if err != nil {
		t.Fatal(err)
	}
	if l.Approval != nil || !strings.HasSuffix(l.Describe(), "NOT verified") {
		t.Fatalf("insecure load: %+v %q", l.Approval, l.Describe())
	}
	// Nothing to record: an unverified plan has no signing time.
	if err := Admit(context.Background(), nil, l); err != nil {
		t.Fatal(err)
	}
}

func TestKeylessPlanFromAnotherIdentityIsRefused(t *testing.T) {
	fs, err := sigstoretest.New()
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	tr, err := fs.TrustedRoot()
	if err != nil {
		t.Fatal(err)
	}
	good := sigstoretest.GitHub("acme/plans", ".github/workflows/sign.yml", "refs/heads/main")
	policy, err := sign.NewPolicy(sign.PolicyOptions{CertificateIdentity: good.Identity(), CertificateOIDCIssuer: sigstoretest.GitHubIssuer, TrustedMaterial: tr})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "refund.hcl")
	writeFile(t, file, []byte(planV1))
	for _, c := range []struct {
		name   string
		claims sigstoretest.Claims
		want   error
	}{
		{"trusted workflow", good, nil},
		{"another repository", sigstoretest.GitHub("acme/plans-evil", ".github/workflows/sign.yml", "refs/heads/main"), sign.ErrIdentityNotAllowed},
		{"another branch", sigstoretest.GitHub("acme/plans", ".github/workflows/sign.yml", "refs/heads/feature"), sign.ErrIdentityNotAllowed},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := sign.Sign(context.Background(), []byte(planV1), sign.Predicate{Kind: sign.KindPlan, Path: "plans/refund.hcl"},
				sign.SignOptions{IDToken: c.claims.Token(), FulcioURL: fs.Fulcio.URL, RekorURL: fs.Rekor.URL})
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, sign.BundlePath(file), s.Bundle)
			l, err := Source{File: file, Path: "plans/refund.hcl", Policy: policy}.Read(context.Background(), time.Now())
			if c.want == nil {
				if err != nil || l.Approval.SignedAtSource != "tlog" || l.Approval.Signer.Identity != good.Identity() {
					t.Fatalf("trusted signer refused: %v", err)
				}
				return
			}
			if !errors.Is(err, c.want) || !errors.Is(err, ErrNotVerified) || !strings.Contains(err.Error(), "not allowed by policy") {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

func openLedger(t testing.TB, dir string) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(context.Background(), ledger.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestAdmitRefusesADowngradeDurably(t *testing.T) {
	dir := t.TempDir()
	k := opensslKeys(t, dir, "release")
	load := func(src string, at time.Time) *Loaded {
		file := filepath.Join(t.TempDir(), "refund.hcl")
		writeFile(t, file, []byte(src))
		writeFile(t, sign.BundlePath(file), k.signBytes(t, []byte(src), "plans/refund.hcl", at))
		l, err := Source{File: file, Path: "plans/refund.hcl", Policy: k.policy}.Read(context.Background(), at)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	v1 := load(planV1, t0)
	v2 := load(planV2, t0.Add(time.Hour))
	state := filepath.Join(dir, "state")
	l := openLedger(t, state)
	if err := Admit(context.Background(), l, v2); err != nil {
		t.Fatal(err)
	}
	err := Admit(context.Background(), l, v1)
	var dg *ledger.DowngradeError
	if !errors.As(err, &dg) || err.Error() != `plan "refund" (signed path plans/refund.hcl) signed at 2026-11-01T10:00:00Z is older than a plan already loaded from the same path (signed at 2026-11-01T11:00:00Z); refusing a downgrade (state directory `+state+` remembers the newer plan): sign this plan again, or give --state DIR to keep its state elsewhere` {
		t.Fatalf("v1 after v2: %v", err)
	}
	if err := Admit(context.Background(), l, v2); err != nil {
		t.Fatalf("v2 again (a restart): %v", err)
	}
	// The high-water mark survives a restart of the proxy.
	l.Close()
	l = openLedger(t, state)
	if err := Admit(context.Background(), l, v1); !errors.Is(err, ledger.ErrDowngrade) {
		t.Fatalf("v1 after a restart: %v", err)
	}
}

// TestAdmitRefusesADowngradeUnderAnotherLabel: the mark is kept per signed
// path too, so an older plan for the same file is refused even when its
// plan label differs, also after a restart.
func TestAdmitRefusesADowngradeUnderAnotherLabel(t *testing.T) {
	dir := t.TempDir()
	k := opensslKeys(t, dir, "release")
	load := func(src, path string, at time.Time) *Loaded {
		file := filepath.Join(t.TempDir(), "refund.hcl")
		writeFile(t, file, []byte(src))
		writeFile(t, sign.BundlePath(file), k.signBytes(t, []byte(src), path, at))
		l, err := Source{File: file, Path: path, Policy: k.policy}.Read(context.Background(), at)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	v2 := load(planV2, "plans/refund.hcl", t0.Add(time.Hour))
	relabeled := load(strings.Replace(planV1, `plan "refund"`, `plan "refund-v1"`, 1), "plans/refund.hcl", t0)
	elsewhere := load(strings.Replace(planV1, `plan "refund"`, `plan "refund-v1"`, 1), "plans/other.hcl", t0)
	state := filepath.Join(dir, "state")
	l := openLedger(t, state)
	if err := Admit(context.Background(), l, v2); err != nil {
		t.Fatal(err)
	}
	want := `plan "refund-v1" (signed path plans/refund.hcl) signed at 2026-11-01T10:00:00Z is older than a plan already loaded from the same path (signed at 2026-11-01T11:00:00Z); refusing a downgrade (state directory ` + state + ` remembers the newer plan): sign this plan again, or give --state DIR to keep its state elsewhere`
	if err := Admit(context.Background(), l, relabeled); !errors.Is(err, ledger.ErrDowngrade) || err.Error() != want {
		t.Fatalf("older plan under another label: %v", err)
	}
	l.Close()
	l = openLedger(t, state)
	if err := Admit(context.Background(), l, relabeled); !errors.Is(err, ledger.ErrDowngrade) {
		t.Fatalf("after a restart: %v", err)
	}
	// Another signed path is another file: its own mark.
	if err := Admit(context.Background(), l, elsewhere); err != nil {
		t.Fatalf("another path: %v", err)
	}
}
