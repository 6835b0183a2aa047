package sign

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planlock/planlock/internal/testkit/vaulttest"
)

// Vault cannot run here: these tests talk to vaulttest, a faithful fake of
// Vault's transit HTTP API (read key, sign, verify; X-Vault-Token checked,
// 403 otherwise), through sigstore's real hashivault provider and Vault's
// real Go client.

const vaultToken = "hvs.planlock-test-secret-token"

// vaultEnv points the provider at v with token, and nowhere else: no OpenBao
// variables, no ~/.vault-token.
func vaultEnv(t *testing.T, addr, token string) {
	t.Setenv("VAULT_ADDR", addr)
	t.Setenv("VAULT_TOKEN", token)
	for _, k := range []string{"BAO_ADDR", "BAO_TOKEN", "TRANSIT_SECRET_ENGINE_PATH", "VAULT_KEY_PREFIX", "VAULT_NAMESPACE"} {
		t.Setenv(k, "")
	}
	t.Setenv("HOME", t.TempDir())
}

func TestVaultTransitRoundTrip(t *testing.T) {
	for _, typ := range []string{"ecdsa-p256", "ecdsa-p384", "ed25519"} {
		t.Run(typ, func(t *testing.T) {
			v := vaulttest.New(vaultToken)
			defer v.Close()
			pubPEM, err := v.CreateKey("planlock-ci", typ)
			if err != nil {
				t.Fatal(err)
			}
			vaultEnv(t, v.URL, vaultToken)

			kp, err := LoadSigningKey(context.Background(), "hashivault://planlock-ci", func(string) ([]byte, error) {
				t.Fatal("KMS reference read as a file")
				return nil, nil
			})
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			s, err := Sign(context.Background(), testPlan, planPredicate(testPath), SignOptions{Keypair: kp})
			if err != nil {
				t.Fatalf("sign: %v", err)
			}
			if v.Signs() != 1 {
				t.Fatalf("Vault made %d signatures, want 1", v.Signs())
			}

			pub, err := ParsePublicKey(pubPEM)
			if err != nil {
				t.Fatal(err)
			}
			p, err := NewPolicy(PolicyOptions{PublicKey: pub})
			if err != nil {
				t.Fatal(err)
			}
			a, err := p.Verify(context.Background(), VerifyInput{Path: testPath, Content: testPlan, Bundle: s.Bundle})
			if err != nil {
				t.Fatalf("verify with the transit key's public key: %v", err)
			}
			id, _ := KeyID(pub)
			if a.Signer.KeyID != id {
				t.Errorf("signer %s, want the transit key %s", a.Signer.KeyID, id)
			}

			tampered := append([]byte(nil), testPlan...)
			tampered[len(tampered)-2] ^= 1
			if _, err := p.Verify(context.Background(), VerifyInput{Path: testPath, Content: tampered, Bundle: s.Bundle}); !errors.Is(err, ErrDigestMismatch) {
				t.Fatalf("tampered plan: err = %v, want ErrDigestMismatch", err)
			}
		})
	}
}

func TestVaultTransitRefusals(t *testing.T) {
	tests := []struct {
		name, ref, token string
		noAddr           bool
		want             string
	}{
		{"wrong token", "hashivault://planlock-ci", "hvs.wrong-secret-token", false, "403 permission denied (check VAULT_TOKEN"},
		{"no token", "hashivault://planlock-ci", "", false, "no token helper configured and ~/.vault-token file not found or empty"},
		{"unknown key", "hashivault://other", vaultToken, false, "could not read data from transit key path: /transit/keys/other"},
		{"key path with slash", "hashivault://a/b", vaultToken, false, "hashivault://<key>"},
		{"no address", "hashivault://planlock-ci", vaultToken, true, "VAULT_ADDR or BAO_ADDR is not set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := vaulttest.New(vaultToken)
			defer v.Close()
			if _, err := v.CreateKey("planlock-ci", "ecdsa-p256"); err != nil {
				t.Fatal(err)
			}
			addr := v.URL
			if tt.noAddr {
				addr = ""
			}
			vaultEnv(t, addr, tt.token)
			_, err := LoadSigningKey(context.Background(), tt.ref, os.ReadFile)
			if err == nil {
				t.Fatal("loaded")
			}
			msg := err.Error()
			t.Log(msg)
			if !strings.Contains(msg, tt.want) {
				t.Errorf("err = %q, want it to say %q", msg, tt.want)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("err spans lines: %q", msg)
			}
			if strings.Contains(msg, "secret") {
				t.Errorf("err shows the token: %q", msg)
			}
			if v.Signs() != 0 {
				t.Errorf("Vault signed %d times", v.Signs())
			}
		})
	}
}

// TestKMSProvidersCompiledIn: the Vault provider is built in and named in
// the refusal of other schemes; a sigstore-kms-hashivault program on $PATH is
// not run in its place.
func TestKMSProvidersCompiledIn(t *testing.T) {
	bin := t.TempDir()
	marker := filepath.Join(bin, "ran")
	if err := os.WriteFile(filepath.Join(bin, "sigstore-kms-hashivault"), []byte("#!/bin/sh\ntouch "+marker+"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	v := vaulttest.New(vaultToken)
	defer v.Close()
	if _, err := v.CreateKey("planlock-ci", "ecdsa-p256"); err != nil {
		t.Fatal(err)
	}
	vaultEnv(t, v.URL, vaultToken)
	if _, err := LoadSigningKey(context.Background(), "hashivault://planlock-ci", os.ReadFile); err != nil {
		t.Fatalf("hashivault: %v", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("sigstore-kms-hashivault from PATH was executed")
	}
	_, err := LoadSigningKey(context.Background(), "evil://key", os.ReadFile)
	if err == nil || !strings.Contains(err.Error(), "KMS scheme evil:// is not supported (this build supports hashivault://, openbao://)") {
		t.Fatalf("evil: err = %v", err)
	}
}
