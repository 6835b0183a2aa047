package planload

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	sgsign "github.com/sigstore/sigstore-go/pkg/sign"

	"github.com/planlock/planlock/sign"
)

// keys are a PEM key pair made by the real openssl command.
type keys struct {
	priv, pub string
	kp        sgsign.Keypair
	policy    *sign.Policy
}

func opensslKeys(t testing.TB, dir, name string) keys {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	k := keys{priv: filepath.Join(dir, name+".key"), pub: filepath.Join(dir, name+".pub")}
	for _, args := range [][]string{
		{"genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", k.priv},
		{"pkey", "-in", k.priv, "-pubout", "-out", k.pub},
	} {
		if out, err := exec.Command("openssl", args...).CombinedOutput(); err != nil {
			t.Fatalf("openssl %v: %v\n%s", args, err, out)
		}
	}
	kp, err := sign.LoadSigningKey(context.Background(), k.priv, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	k.kp = kp
	pubPEM, err := os.ReadFile(k.pub)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := sign.ParsePublicKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	if k.policy, err = sign.NewPolicy(sign.PolicyOptions{PublicKey: pub}); err != nil {
		t.Fatal(err)
	}
	return k
}

// signBytes returns the bundle approving content as a plan at path,
// signed at the given time (the predicate's signedAt: a key-signed bundle
// has no log entry, so this is the time the no-downgrade rule compares).
func (k keys) signBytes(t testing.TB, content []byte, path string, at time.Time) []byte {
	t.Helper()
	s, err := sign.Sign(context.Background(), content, sign.Predicate{Kind: sign.KindPlan, Path: path},
		sign.SignOptions{Keypair: k.kp, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	return s.Bundle
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// replace writes b to a temporary file and renames it over path, as an
// editor or a deployment does: readers see the old or the new file, whole.
func replace(t testing.TB, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	writeFile(t, tmp, b)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

const planV1 = `plan "refund" {
  goal  = "look up order 4711 once"
  order = "any"
  step "lookup" {
    tool      = "get_order"
    max_calls = 1
    arg "order_id" { eq = "4711" }
  }
}
`

const planV2 = `plan "refund" {
  goal  = "look up order 4711 up to three times, close its ticket"
  order = "any"
  step "lookup" {
    tool      = "get_order"
    max_calls = 3
    arg "order_id" { eq = "4711" }
  }
  step "close" {
    tool = "close_ticket"
    arg "ticket_id" { eq = "T-4711" }
    arg "comment"   { any = true }
  }
}
`
