package sign_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/planlock/planlock/sign"
)

// A key-based approval: sign a plan's bytes, then verify them the way the
// proxy does (policy from the operator, bytes read once).
func ExamplePolicy_Verify() {
	ctx := context.Background()
	privPEM, pubPEM, _ := sign.GenerateKeyPair("ed25519")
	plan := []byte("plan \"refund-4711\" {\n}\n")

	kp, _ := sign.LoadSigningKey(ctx, "release.key", func(string) ([]byte, error) { return privPEM, nil })
	signed, _ := sign.Sign(ctx, plan, sign.Predicate{Kind: sign.KindPlan, Path: "plans/refund.hcl", PullRequest: 42}, sign.SignOptions{Keypair: kp})

	pub, _ := sign.ParsePublicKey(pubPEM)
	policy, _ := sign.NewPolicy(sign.PolicyOptions{PublicKey: pub})
	a, err := policy.Verify(ctx, sign.VerifyInput{Path: "plans/refund.hcl", Content: plan, Bundle: signed.Bundle, Kind: sign.KindPlan})
	fmt.Println(err, a.Kind, a.Predicate.PullRequest, a.SignedAtSource)

	_, err = policy.Verify(ctx, sign.VerifyInput{Path: "plans/refund.hcl", Content: append(plan, ' '), Bundle: signed.Bundle})
	fmt.Println(errors.Is(err, sign.ErrDigestMismatch))
	// Output:
	// <nil> plan 42 predicate
	// true
}
