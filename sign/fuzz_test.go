package sign

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzVerifyBundle feeds arbitrary bundle bytes to Policy.Verify with a key
// policy. Verification never panics, and any bundle other than the one
// signed (byte for byte) is refused: a mutated bundle never verifies.
func FuzzVerifyBundle(f *testing.F) {
	priv, pub, err := GenerateKeyPair("ecdsa-p256")
	if err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	keyFile := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(keyFile, priv, 0o600); err != nil {
		f.Fatal(err)
	}
	pubKey, err := ParsePublicKey(pub)
	if err != nil {
		f.Fatal(err)
	}
	policy, err := NewPolicy(PolicyOptions{PublicKey: pubKey})
	if err != nil {
		f.Fatal(err)
	}
	content := []byte("plan \"p\" {\n  goal = \"g\"\n  step \"s\" { tool = \"t\" }\n}\n")
	pred := Predicate{Kind: KindPlan, Path: "plans/p.hcl", Repository: "acme/plans", SignedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	good := signWithKey(f, keyFile, content, pred)
	in := VerifyInput{Path: "plans/p.hcl", Content: content}

	// The genuine bundle verifies: the target tests something.
	in.Bundle = good
	if _, err := policy.Verify(context.Background(), in); err != nil {
		f.Fatalf("the genuine bundle does not verify: %v", err)
	}
	f.Add(good)
	f.Add(bytes.Replace(good, []byte(`"mediaType"`), []byte(`"mediatype"`), 1))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(``))
	f.Add(good[:len(good)/2])

	f.Fuzz(func(t *testing.T, bundle []byte) {
		in := in
		in.Bundle = bundle
		a, err := policy.Verify(context.Background(), in)
		if bytes.Equal(bundle, good) {
			return // may verify
		}
		if err == nil {
			// Only a re-encoding of the same signed envelope may pass
			// (JSON whitespace, key order); it must still be this approval.
			if a == nil || a.Path != "plans/p.hcl" || a.Digest != Digest(content) || a.Predicate.Repository != "acme/plans" {
				t.Fatalf("a mutated bundle verified as %+v", a)
			}
			return
		}
		if err.Error() == "" {
			t.Fatal("refusal without a reason")
		}
	})
}
