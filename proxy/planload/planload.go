// Package planload loads the plan a proxy runs: the file is read once, those
// bytes are verified against the operator's trust policy and parsed, an
// expired plan is refused, and the no-downgrade rule is applied through the
// ledger before the plan is served. Reloader re-does all of it when the plan
// file or its bundle changes on disk, and keeps the last verified plan when
// the new one does not pass.
//
// planload is a subpackage of the public package proxy: a program embedding
// the gate loads, verifies and admits the plan it gives proxy.Config with it.
package planload

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/boundedio"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/sign"
)

// Source is where the plan is and how it is trusted.
type Source struct {
	// File is the plan file.
	File string
	// Bundle is its sigstore bundle; empty means sign.BundlePath(File).
	Bundle string
	// Path is the plan's path in the repository, as signed; empty means
	// sign.RepoPath(File).
	Path string
	// Policy is the operator's trust policy. Nil means the plan is not
	// verified (--insecure-skip-verify); every load then warns.
	Policy *sign.Policy
}

// Loaded is a plan read, verified and parsed from the same bytes.
type Loaded struct {
	Plan *hclplan.Plan
	// Approval is the verified approval; nil when the source has no policy.
	Approval *sign.Approval
	// Trust is the fingerprint of the trust policy that verified it
	// (sign.Policy.Fingerprint); "" when not verified.
	Trust string
	// File is the plan file's absolute path, as read.
	File string
}

// Refusals. Every error Read returns is one line and, except an unverified
// plan file that cannot be read, wraps one of them (errors.Is);
// ErrNotVerified also wraps the sign package's sentinel (a verified plan
// that cannot be read is not verified).
var (
	ErrNotVerified = errors.New("plan not verified")
	ErrInvalid     = errors.New("plan not valid")
	ErrExpired     = errors.New("plan expired")
)

// refusal is a one-line error wrapping one of the sentinels above (and the
// cause, when there is one) without repeating the sentinel's words.
type refusal struct {
	kind, cause error
	msg         string
}

func (e *refusal) Error() string   { return e.msg }
func (e *refusal) Unwrap() []error { return []error{e.kind, e.cause} }

// BundleFile is the bundle file the source reads.
func (s Source) BundleFile() string {
	if s.Bundle != "" {
		return s.Bundle
	}
	return sign.BundlePath(s.File)
}

// InsecureWarning is printed each time an unverified plan is loaded.
func InsecureWarning(file string) string {
	return "planlock: WARNING: --insecure-skip-verify: running plan " + file + " WITHOUT verifying its signature; anyone who can edit this file controls what the agent may do"
}

// Read reads the plan file once, verifies those bytes (unless the source has
// no policy), parses the same bytes and refuses a plan expired at now. The
// error is one line saying why.
func (s Source) Read(ctx context.Context, now time.Time) (*Loaded, error) {
	var src []byte
	var approval *sign.Approval
	if s.Policy == nil {
		b, err := boundedio.ReadFile(s.File, boundedio.MaxPlanBytes)
		if err != nil {
			return nil, fmt.Errorf("read plan: %w", err)
		}
		src = b
	} else {
		b, a, err := s.Policy.VerifyFile(ctx, sign.FileInput{File: s.File, Bundle: s.Bundle, Path: s.Path, Kind: sign.KindPlan})
		if err != nil {
			return nil, &refusal{kind: ErrNotVerified, cause: err, msg: "plan " + s.File + " refused: " + err.Error()}
		}
		src, approval = b, a
	}
	plan, diags := hclplan.Parse(s.File, src)
	if diags.HasErrors() {
		return nil, &refusal{kind: ErrInvalid, cause: diags, msg: fmt.Sprintf("plan %s is not valid: %s", s.File, strings.ReplaceAll(diags.Error(), "\n", "; "))}
	}
	if err := CheckExpiry(plan, now); err != nil {
		return nil, err
	}
	l := &Loaded{Plan: plan, Approval: approval, File: s.File}
	if abs, err := filepath.Abs(s.File); err == nil {
		l.File = abs
	}
	if s.Policy != nil {
		l.Trust = s.Policy.Fingerprint()
	}
	return l, nil
}

// CheckExpiry refuses a plan expired at now (ErrExpired), with the one-line
// error the proxy gives; planlock verify refuses it with the same.
func CheckExpiry(plan *hclplan.Plan, now time.Time) error {
	if plan.Expired(now) {
		return &refusal{kind: ErrExpired, msg: fmt.Sprintf("plan %q expired at %s; refusing to load it (to renew it, sign a new plan with a later expires)", plan.Name, plan.Expires.UTC().Format(time.RFC3339))}
	}
	return nil
}

// Describe says in a few words what was loaded, for the log.
func (l *Loaded) Describe() string {
	s := l.short()
	if l.Approval == nil {
		return s + ", NOT verified"
	}
	return s + fmt.Sprintf(", signed by %s at %s", l.Approval.Signer.Identity, l.Approval.SignedAt.UTC().Format(time.RFC3339))
}

// short names the plan and its digest.
func (l *Loaded) short() string {
	return fmt.Sprintf("plan %q (%s)", l.Plan.Name, shortDigest(l.Plan.Digest))
}

func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12] + "…"
	}
	return d
}

// Admitter records loaded plans durably and refuses a downgrade;
// *ledger.Ledger is one.
type Admitter interface {
	LoadPlan(ctx context.Context, p ledger.PlanLoad) error
}

// SignedPath is the key of a verified plan's no-downgrade mark besides its
// name: the repository path its signature approves (the predicate's path,
// which verification checked is the path the loader expects). The
// repository is left out on purpose, so that a plan signed without one
// (key mode outside CI) does not escape the mark of the same file.
func (l *Loaded) SignedPath() string {
	if l.Approval == nil {
		return ""
	}
	return l.Approval.Path
}

// Identity is what a plan's state is kept for: what was signed, never a
// label the plan file chooses.
type Identity struct {
	// Trust is the trust policy's fingerprint; "" for an unverified plan.
	Trust string
	// Path is the repository path the signature approves; for an
	// unverified plan (which has none), the plan file's absolute path.
	Path string
}

// Identity is the identity of the loaded plan's state.
func (l *Loaded) Identity() Identity {
	if l.Approval == nil {
		return Identity{Path: l.File}
	}
	return Identity{Trust: l.Trust, Path: l.Approval.Path}
}

// Signed reports whether the identity is a verified plan's.
func (id Identity) Signed() bool { return id.Trust != "" }

// String says what the identity is, for messages.
func (id Identity) String() string {
	if !id.Signed() {
		return "unverified plan file " + id.Path
	}
	return "signed path " + id.Path + " under trust policy " + id.Trust
}

// Admit applies the no-downgrade rule to a verified plan and records it as
// loaded: a plan signed before the newest plan already loaded from the same
// signed path under the same trust policy, whatever its plan label, is
// refused (*ledger.DowngradeError), even though its signature is valid;
// the label plays no part. An unverified plan has no signing time and is not recorded.
func Admit(ctx context.Context, a Admitter, l *Loaded) error {
	if l.Approval == nil {
		return nil
	}
	err := a.LoadPlan(ctx, ledger.PlanLoad{Name: l.Plan.Name, Digest: l.Plan.Digest, SignedAt: l.Approval.SignedAt, Path: l.SignedPath(), Trust: l.Trust})
	if err != nil && !errors.Is(err, ledger.ErrDowngrade) {
		return fmt.Errorf("record the plan load: %w", err)
	}
	if err != nil {
		// The way out: a user who reuses a signed path (two walkthroughs,
		// one file name) needs to know where the mark is kept.
		where := "the state remembers the newer plan"
		if led, ok := a.(*ledger.Ledger); ok { // not a PostgreSQL state
			where = "state directory " + led.Dir() + " remembers the newer plan"
		}
		return fmt.Errorf("%w (%s): sign this plan again, or give --state DIR to keep its state elsewhere", err, where)
	}
	return nil
}
