package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/user"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/internal/approvals"
	"github.com/planlock/planlock/internal/boundedio"
	"github.com/planlock/planlock/internal/oneline"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/sign"
)

// holdsApproveOptions are the flags of planlock holds approve.
type holdsApproveOptions struct {
	cmdline
	holdStateOptions
	Key string
}

func (o *holdsApproveOptions) flags() []cli.Flag {
	return append(o.stateOptions.flags(),
		&cli.StringFlag{Name: "key", EnvVars: []string{"PLANLOCK_SIGNING_KEY"}, Usage: "sign with this PEM private key `FILE` or Vault transit key hashivault://KEYNAME", TakesFile: true, Destination: &o.Key},
		o.auditFlag(),
	)
}

func holdsApproveCommand() *cli.Command {
	o := &holdsApproveOptions{}
	return &cli.Command{
		Name:      "approve",
		Usage:     "approve one held call: sign its hold request as a hold approval",
		ArgsUsage: "ID",
		Description: `For a proxy without a Git remote: signs the hold request file the proxy
wrote (<state>/approvals/ID.hcl, exactly one call: plan digest, tool and
arguments) as a hold approval, ID.hcl.sigstore.json next to it. When the
agent repeats exactly that call, the proxy verifies the approval with its
own trust policy (so the key must be one the proxy trusts), runs the call
once and records who approved it; an approval its policy does not accept
leaves the call held. The hold's call is printed first.

Examples:
   planlock holds approve 6f1c0d2a9b8e7f60 --key ~/.config/planlock/approver.key
   planlock holds approve --state /var/lib/planlock/refund 6f1c0d2a9b8e7f60 --key hashivault://planlock`,
		Flags:  o.flags(),
		Action: action(o, runHoldsApprove),
	}
}

func runHoldsApprove(ctx context.Context, o *holdsApproveOptions) error {
	if len(o.Args) != 1 {
		return usageErrorf("holds approve: give exactly one hold id")
	}
	if o.Key == "" {
		return usageErrorf("holds approve: give --key PRIVATE_KEY (its public key must be in the proxy's trust policy)")
	}
	dir, h, req, err := o.pendingHold(ctx, "approve", o.Args[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(o.IO.err, "Approving hold %s: %s %s (step %q, plan %s), expires %s.\n",
		h.ID, req.Tool, req.Args, req.Step, req.PlanName, formatTime(req.Expires))
	kp, err := sign.LoadSigningKey(ctx, o.Key, func(p string) ([]byte, error) { return boundedio.ReadFile(p, boundedio.MaxKeyBytes) })
	if err != nil {
		return failf("holds approve: %v", err)
	}
	content, err := boundedio.ReadFile(approvals.LocalRequestPath(dir, h.ID), boundedio.MaxHoldBytes)
	if err != nil {
		return failf("holds approve: %v", err)
	}
	pred := sign.Predicate{Kind: sign.KindHold, Path: req.Path()}
	if u, err := user.Current(); err == nil && u.Username != "" {
		pred.Approvers = []string{u.Username}
	}
	signed, err := sign.Sign(ctx, content, pred, sign.SignOptions{Keypair: kp})
	if err != nil {
		return failf("holds approve: %v", err)
	}
	bundlePath := sign.BundlePath(approvals.LocalRequestPath(dir, h.ID))
	if err := approvals.WriteFileAtomic(bundlePath, signed.Bundle); err != nil {
		return failf("holds approve: %v", err)
	}
	fmt.Fprintf(o.IO.out, "Approved hold %s (signed by %s) -> %s\nThe agent's next identical call runs once.\n", h.ID, signed.Signer.Identity, bundlePath)
	return nil
}

// holdsRejectOptions are the flags of planlock holds reject.
type holdsRejectOptions struct {
	cmdline
	holdStateOptions
	Reason string
}

func (o *holdsRejectOptions) flags() []cli.Flag {
	return append(o.stateOptions.flags(), o.auditFlag(),
		&cli.StringFlag{Name: "reason", Usage: "why, recorded in the rejection `TEXT`", Destination: &o.Reason})
}

func holdsRejectCommand() *cli.Command {
	o := &holdsRejectOptions{}
	return &cli.Command{
		Name:      "reject",
		Usage:     "reject one held call for good",
		ArgsUsage: "ID",
		Description: `For a proxy without a Git remote: marks the hold rejected
(<state>/approvals/ID.rejected). When the agent repeats the call, the proxy
blocks it and tells it not to retry. A rejection needs no signature: it can
only stop a call.

Examples:
   planlock holds reject 6f1c0d2a9b8e7f60`,
		Flags:  o.flags(),
		Action: action(o, runHoldsReject),
	}
}

func runHoldsReject(ctx context.Context, o *holdsRejectOptions) error {
	if len(o.Args) != 1 {
		return usageErrorf("holds reject: give exactly one hold id")
	}
	dir, h, _, err := o.pendingHold(ctx, "reject", o.Args[0])
	if err != nil {
		return err
	}
	who := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		who = u.Username
	}
	note := fmt.Sprintf("rejected by %s at %s", who, time.Now().UTC().Format(time.RFC3339))
	if r := o.Reason; r != "" {
		note += ": " + oneline.Of(r, 0)
	}
	path := approvals.LocalRejectionPath(dir, h.ID)
	if err := approvals.WriteFileAtomic(path, []byte(note+"\n")); err != nil {
		return failf("holds reject: %v", err)
	}
	fmt.Fprintf(o.IO.out, "Rejected hold %s -> %s\nThe agent's next identical call is blocked.\n", h.ID, path)
	return nil
}

// pendingHold finds a hold that is still waiting, and the request file the
// proxy wrote for it, checked against the state's record of the hold.
func (o *holdStateOptions) pendingHold(ctx context.Context, name, id string) (string, ledger.Hold, *gitapprove.HoldRequest, error) {
	cmd := "holds " + name
	dir, h, err := o.findHold(ctx, name, id)
	if err != nil {
		return "", h, nil, err
	}
	if s := o.State; s != "" {
		dir = s
	}
	switch h.State {
	case ledger.HoldPending:
	case ledger.HoldExpired:
		return "", h, nil, failf("%s: hold %s expired at %s; the agent's next call makes a new one", cmd, id, formatTime(h.Expires))
	default:
		return "", h, nil, failf("%s: hold %s is %s, not pending", cmd, id, h.State)
	}
	if h.PRURL != approvals.LocalPR {
		return "", h, nil, failf("%s: hold %s is approved by its pull request (%s), not locally", cmd, id, h.PRURL)
	}
	path := approvals.LocalRequestPath(dir, id)
	src, err := boundedio.ReadFile(path, boundedio.MaxHoldBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return "", h, nil, failf("%s: hold %s has no request file %s", cmd, id, path)
	}
	if err != nil {
		return "", h, nil, failf("%s: %v", cmd, err)
	}
	req, err := gitapprove.ParseHold(src)
	if err != nil {
		return "", h, nil, failf("%s: %s: %v", cmd, path, err)
	}
	// The file is in a writable directory: sign it only if it is the call
	// the state recorded (the proxy checks the same binding again).
	canon, cerr := ledger.CanonicalArgs(req.Args)
	switch {
	case req.ID != h.ID || req.PlanDigest != h.PlanDigest || req.Tool != h.Tool || req.Step != h.Step:
		return "", h, nil, failf("%s: %s does not match hold %s in the state (plan, step or tool differ); not signed", cmd, path, id)
	case cerr != nil || (len(h.Args) > 0 && !bytes.Equal(canon, h.Args)):
		return "", h, nil, failf("%s: %s does not match hold %s in the state (the arguments differ); not signed", cmd, path, id)
	}
	return dir, h, req, nil
}
