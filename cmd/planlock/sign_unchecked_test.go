package main

import (
	"context"
	"os"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/planlock/planlock/sign"
)

// cmdSignUnchecked signs a file with a key without the expiry check of
// "planlock sign", so that a script can show the proxy refusing a signed
// plan that has expired (which planlock sign will no longer make):
//
//	sign-unchecked KEY FILE
func cmdSignUnchecked(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: sign-unchecked KEY FILE")
	}
	ctx := context.Background()
	kp, err := sign.LoadSigningKey(ctx, ts.MkAbs(args[0]), os.ReadFile)
	ts.Check(err)
	content, err := os.ReadFile(ts.MkAbs(args[1]))
	ts.Check(err)
	path, err := sign.CleanPath(args[1])
	ts.Check(err)
	signed, err := sign.Sign(ctx, content, sign.Predicate{Kind: sign.KindPlan, Path: path}, sign.SignOptions{Keypair: kp})
	ts.Check(err)
	ts.Check(os.WriteFile(sign.BundlePath(ts.MkAbs(args[1])), signed.Bundle, 0o644))
}
