package planload_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/proxy/planload"
	"github.com/planlock/planlock/sign"
)

// An embedder loads the plan it gives proxy.Config: read once, verified
// against its own trust policy (never one the plan names), parsed from the
// same bytes, then admitted by the state (the no-downgrade rule). An
// edited byte is refused.
func ExampleSource_Read() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "planlock-plan")
	defer os.RemoveAll(dir)

	// What the approval workflow does on merge: sign the plan's bytes.
	privPEM, pubPEM, _ := sign.GenerateKeyPair("ed25519")
	plan := []byte(`plan "refund-4711" {
  goal = "refund order 4711"
  step "refund" {
    tool      = "refund_customer"
    max_calls = 1
  }
}
`)
	kp, _ := sign.LoadSigningKey(ctx, "release.key", func(string) ([]byte, error) { return privPEM, nil })
	signed, _ := sign.Sign(ctx, plan, sign.Predicate{Kind: sign.KindPlan, Path: "plans/refund.hcl", PullRequest: 42}, sign.SignOptions{Keypair: kp})
	file := filepath.Join(dir, "refund.hcl")
	_ = os.WriteFile(file, plan, 0o600)
	_ = os.WriteFile(sign.BundlePath(file), signed.Bundle, 0o600)

	// The operator's trust policy: this key only.
	pub, _ := sign.ParsePublicKey(pubPEM)
	policy, _ := sign.NewPolicy(sign.PolicyOptions{PublicKey: pub})
	src := planload.Source{File: file, Path: "plans/refund.hcl", Policy: policy}
	loaded, err := src.Read(ctx, time.Now())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(loaded.Plan.Name, loaded.Approval.Predicate.PullRequest, len(loaded.Plan.Steps))

	state, err := ledger.Open(ctx, ledger.Options{Dir: filepath.Join(dir, "state")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer state.Close()
	fmt.Println(planload.Admit(ctx, state, loaded))

	// One byte more, and the plan is not loaded.
	_ = os.WriteFile(file, append(plan, ' '), 0o600)
	_, err = src.Read(ctx, time.Now())
	fmt.Println(errors.Is(err, planload.ErrNotVerified))
	// Output:
	// refund-4711 42 1
	// <nil>
	// true
}
