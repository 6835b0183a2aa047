package sign

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sigstore/sigstore-go/pkg/root"

	"github.com/planlock/planlock/internal/testkit/sigstoretest"
)

// Key-signed bundles with transparency log entries and RFC 3161 timestamps
// are made with the real sigstore-go signing code against the fake Rekor and
// TSA of package sigstoretest (the real services cannot run here; the fake
// signs SETs, checkpoints and timestamps exactly as they are verified).

// testKeypair makes an ECDSA P-256 signing key and its trusted public key.
func testKeypair(t testing.TB) (*Keypair, PolicyOptions) {
	t.Helper()
	priv, pub, err := GenerateKeyPair("ecdsa-p256")
	if err != nil {
		t.Fatal(err)
	}
	kp, err := LoadSigningKey(context.Background(), "k.pem", func(string) ([]byte, error) { return priv, nil })
	if err != nil {
		t.Fatal(err)
	}
	pk, err := ParsePublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return kp.(*Keypair), PolicyOptions{PublicKey: pk}
}

// claimedAt is the signing time a key signer writes into its predicate: far
// from the real time, so the tests see which one Verify reports.
var claimedAt = time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)

func signKeyLogged(t testing.TB, kp *Keypair, fs *sigstoretest.Sigstore, rekor, tsa bool, content []byte) []byte {
	t.Helper()
	pred := planPredicate(testPath)
	pred.SignedAt = claimedAt
	o := SignOptions{Keypair: kp}
	if rekor {
		o.RekorURL = fs.Rekor.URL
	}
	if tsa {
		o.TSAURL = fs.TSA.URL
	}
	s, err := Sign(context.Background(), content, pred, o)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	if rekor != (s.LogIndex >= 0) {
		t.Fatalf("log index %d with rekor=%v", s.LogIndex, rekor)
	}
	return s.Bundle
}

func trustedRoot(t testing.TB, fs *sigstoretest.Sigstore) root.TrustedMaterial {
	t.Helper()
	tr, err := fs.TrustedRoot()
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func tlogEntries(m map[string]any) []any {
	return m["verificationMaterial"].(map[string]any)["tlogEntries"].([]any)
}

func setTlogEntries(m map[string]any, e []any) {
	m["verificationMaterial"].(map[string]any)["tlogEntries"] = e
}

func timestamps(m map[string]any) []any {
	return m["verificationMaterial"].(map[string]any)["timestampVerificationData"].(map[string]any)["rfc3161Timestamps"].([]any)
}

func setTimestamps(m map[string]any, ts []any) {
	m["verificationMaterial"].(map[string]any)["timestampVerificationData"] = map[string]any{"rfc3161Timestamps": ts}
}

func decode(t *testing.T, b []byte) map[string]any {
	var m map[string]any
	editBundle(t, b, func(x map[string]any) { m = x })
	return m
}

// TestKeyBundleSigningTime: the signing time of a key-signed approval comes
// from a verified log entry, else a verified timestamp, and only without
// either from the signer's own claim.
func TestKeyBundleSigningTime(t *testing.T) {
	fs := newFake(t)
	kp, opts := testKeypair(t)
	opts.TrustedMaterial = trustedRoot(t, fs)
	p, err := NewPolicy(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		rekor, tsa bool
		source     string
	}{
		{"no log, no timestamp", false, false, "predicate"},
		{"logged", true, false, "tlog"},
		{"timestamped", false, true, "tsa"},
		{"logged and timestamped", true, true, "tlog"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := time.Now().Add(-2 * time.Second)
			b := signKeyLogged(t, kp, fs, tc.rekor, tc.tsa, testPlan)
			a, err := p.Verify(context.Background(), VerifyInput{Path: testPath, Content: testPlan, Bundle: b})
			if err != nil {
				t.Fatalf("verify: %v", err)
			}
			if a.SignedAtSource != tc.source {
				t.Fatalf("signing time source = %q, want %q", a.SignedAtSource, tc.source)
			}
			if tc.source == "predicate" {
				if !a.SignedAt.Equal(claimedAt) {
					t.Errorf("signed at %v, want the claimed %v", a.SignedAt, claimedAt)
				}
				return
			}
			if a.SignedAt.Before(before.Truncate(time.Second)) || a.SignedAt.After(time.Now().Add(2*time.Second)) {
				t.Errorf("signed at %v, want the time it was logged or stamped (around %v), not the claimed %v", a.SignedAt, before, claimedAt)
			}
		})
	}
}

// TestKeyBundleJunkLogMaterial: a log entry or timestamp in a key-signed
// bundle is checked against the trusted root; one that does not verify
// refuses the bundle, it is never ignored.
func TestKeyBundleJunkLogMaterial(t *testing.T) {
	fs := newFake(t)
	other := newFake(t) // another log and TSA, not in the trusted root
	kp, opts := testKeypair(t)
	opts.TrustedMaterial = trustedRoot(t, fs)
	p, err := NewPolicy(opts)
	if err != nil {
		t.Fatal(err)
	}
	plain := signKeyLogged(t, kp, fs, false, false, testPlan)
	logged := signKeyLogged(t, kp, fs, true, false, testPlan)
	stamped := signKeyLogged(t, kp, fs, false, true, testPlan)
	otherPlan := []byte(strings.Replace(string(testPlan), "4711", "4712", 1))
	loggedOther := signKeyLogged(t, kp, fs, true, true, otherPlan)
	untrusted := signKeyLogged(t, kp, other, true, true, testPlan)

	entryOf := func(b []byte) any { return tlogEntries(decode(t, b))[0] }
	stampOf := func(b []byte) any { return timestamps(decode(t, b))[0] }

	cases := []struct {
		name string
		b    []byte
		msg  string
	}{
		{"log entry of another plan", editBundle(t, plain, func(m map[string]any) {
			setTlogEntries(m, []any{entryOf(loggedOther)})
		}), "transparency log"},
		{"integrated time changed", editBundle(t, logged, func(m map[string]any) {
			e := tlogEntries(m)[0].(map[string]any)
			e["integratedTime"] = "1600000000"
		}), "transparency log"},
		{"log entry from an untrusted log", editBundle(t, plain, func(m map[string]any) {
			setTlogEntries(m, []any{entryOf(untrusted)})
		}), "transparency log"},
		{"a good entry and an untrusted one", editBundle(t, logged, func(m map[string]any) {
			setTlogEntries(m, append(tlogEntries(m), entryOf(untrusted)))
		}), "transparency log"},
		{"timestamp of another plan", editBundle(t, plain, func(m map[string]any) {
			setTimestamps(m, []any{stampOf(loggedOther)})
		}), "timestamp"},
		{"timestamp from an untrusted authority", editBundle(t, plain, func(m map[string]any) {
			setTimestamps(m, []any{stampOf(untrusted)})
		}), "timestamp"},
		{"a good timestamp and an untrusted one", editBundle(t, stamped, func(m map[string]any) {
			setTimestamps(m, append(timestamps(m), stampOf(untrusted)))
		}), "timestamp"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, err := p.Verify(context.Background(), VerifyInput{Path: testPath, Content: testPlan, Bundle: tc.b})
			if err == nil {
				t.Fatalf("accepted, signed at %v from %s", a.SignedAt, a.SignedAtSource)
			}
			if !errors.Is(err, ErrSignatureInvalid) || !strings.Contains(err.Error(), tc.msg) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want ErrSignatureInvalid about the %s, on one line", err, tc.msg)
			}
			t.Logf("refused: %v", err)
		})
	}

	// Without a trusted root the log material cannot be checked: refused.
	keyOnly, err := NewPolicy(PolicyOptions{PublicKey: opts.PublicKey})
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"logged": logged, "stamped": stamped} {
		_, err := keyOnly.Verify(context.Background(), VerifyInput{Path: testPath, Content: testPlan, Bundle: b})
		if !errors.Is(err, ErrSignatureInvalid) || !strings.Contains(err.Error(), "no trusted root") {
			t.Errorf("%s without a trusted root: err = %v, want a refusal naming the missing trusted root", name, err)
		}
	}
}

// TestKeyPolicyLoadsTrustedRootOnlyWhenNeeded: a key policy without a
// trusted root asks LoadTrustedMaterial only for a bundle with log
// material, once, and a failed load refuses that bundle.
func TestKeyPolicyLoadsTrustedRootOnlyWhenNeeded(t *testing.T) {
	fs := newFake(t)
	kp, opts := testKeypair(t)
	plain := signKeyLogged(t, kp, fs, false, false, testPlan)
	logged := signKeyLogged(t, kp, fs, true, false, testPlan)

	loads := 0
	opts.LoadTrustedMaterial = func(context.Context) (root.TrustedMaterial, error) {
		loads++
		return trustedRoot(t, fs), nil
	}
	p, err := NewPolicy(opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range [][]byte{plain, logged, logged} {
		if _, err := p.Verify(context.Background(), VerifyInput{Path: testPath, Content: testPlan, Bundle: b}); err != nil {
			t.Fatalf("bundle %d: %v", i, err)
		}
		if want := min(i, 1); loads != want {
			t.Fatalf("after bundle %d: %d loads, want %d", i, loads, want)
		}
	}

	opts.LoadTrustedMaterial = func(context.Context) (root.TrustedMaterial, error) {
		return nil, errors.New("TUF repository unreachable")
	}
	failing, err := NewPolicy(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := failing.Verify(context.Background(), VerifyInput{Path: testPath, Content: testPlan, Bundle: plain}); err != nil {
		t.Fatalf("bundle without log material: %v", err)
	}
	_, err = failing.Verify(context.Background(), VerifyInput{Path: testPath, Content: testPlan, Bundle: logged})
	if !errors.Is(err, ErrSignatureInvalid) || !strings.Contains(err.Error(), "TUF repository unreachable") {
		t.Fatalf("err = %v, want a refusal naming the load failure", err)
	}
}
