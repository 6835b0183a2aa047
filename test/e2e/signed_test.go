//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/planlock/planlock/sign"
)

// signPlan signs src as plans/<name> with a fresh key pair at signedAt and
// returns the plan file and the public key file.
func signPlan(t *testing.T, dir, name, src string, signedAt time.Time, privPEM []byte) string {
	t.Helper()
	ctx := context.Background()
	kp, err := sign.LoadSigningKey(ctx, "key", func(string) ([]byte, error) { return privPEM, nil })
	if err != nil {
		t.Fatal(err)
	}
	signed, err := sign.Sign(ctx, []byte(src), sign.Predicate{Kind: sign.KindPlan, Path: "plans/" + name, PullRequest: 7, SignedAt: signedAt}, sign.SignOptions{Keypair: kp})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, name)
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sign.BundlePath(file), signed.Bundle, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func TestProxyLoadsOnlyVerifiedPlansAndRefusesADowngrade(t *testing.T) {
	dir := t.TempDir()
	privPEM, pubPEM, err := sign.GenerateKeyPair("ed25519")
	if err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(dir, "release.pub")
	if err := os.WriteFile(pub, pubPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	otherPriv, _, err := sign.GenerateKeyPair("ed25519")
	if err != nil {
		t.Fatal(err)
	}
	t1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	// v1 and v2 are two versions of plans/refund.hcl; v1 is signed first,
	// and is signed again under another label; plans/other.hcl is another
	// file with the same label.
	for _, d := range []string{"v1", "v1-relabelled", "v2"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	v1 := signPlan(t, filepath.Join(dir, "v1"), "refund.hcl", anyOrder(refundPlan), t1, privPEM)
	relabelled := signPlan(t, filepath.Join(dir, "v1-relabelled"), "refund.hcl",
		strings.Replace(anyOrder(refundPlan), `plan "refund-4711"`, `plan "refund-any"`, 1), t1, privPEM)
	v2src := strings.Replace(anyOrder(refundPlan), "max_calls = 3", "max_calls = 2", 1)
	v2 := signPlan(t, filepath.Join(dir, "v2"), "refund.hcl", v2src, t1.Add(time.Hour), privPEM)
	other := signPlan(t, dir, "other.hcl", anyOrder(refundPlan), t1, privPEM)
	forged := signPlan(t, dir, "forged.hcl", anyOrder(refundPlan), t1, otherPriv)
	tampered := signPlan(t, dir, "tampered.hcl", anyOrder(refundPlan), t1, privPEM)
	if err := os.WriteFile(tampered, []byte(strings.Replace(anyOrder(refundPlan), "max = 30", "max = 3000", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	// The proxy runs until its stdin closes (here at once).
	run := func(plan string) (string, error) {
		cmd := exec.Command(planlockBin, "proxy", "--plan", plan, "--path", "plans/"+filepath.Base(plan), "--key", pub,
			"--state", state, "--", refundBin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	tests := []struct {
		plan, want string
		ok         bool
	}{
		{plan: v2, ok: true, want: "verified: signed by key sha256:"},
		{plan: v2, ok: true, want: "verified"}, // the same plan again
		{plan: v1, want: `plan "refund-4711" (signed path plans/refund.hcl) signed at 2026-11-01T00:00:00Z is older than a plan already loaded from the same path (signed at 2026-11-01T01:00:00Z); refusing a downgrade (state directory ` + state + ` remembers the newer plan): sign this plan again, or give --state DIR to keep its state elsewhere`},
		{plan: relabelled, want: `plan "refund-any" (signed path plans/refund.hcl) signed at 2026-11-01T00:00:00Z is older`},
		{plan: other, ok: true, want: "verified"}, // one label, another signed path: its own mark
		{plan: forged, want: "key mismatch"},
		{plan: tampered, want: "digest mismatch"},
		{plan: filepath.Join(dir, "missing.hcl"), want: "refused"},
	}
	for _, tt := range tests {
		out, err := run(tt.plan)
		if tt.ok != (err == nil) || !strings.Contains(out, tt.want) {
			t.Fatalf("%s: err %v\n%s\nwant ok=%v and %q", filepath.Base(tt.plan), err, out, tt.ok, tt.want)
		}
		if !tt.ok {
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
				t.Fatalf("%s: exit %v, want 1", filepath.Base(tt.plan), err)
			}
		}
		if strings.Contains(out, "WARNING") {
			t.Fatalf("a verified run warns: %s", out)
		}
	}
}
