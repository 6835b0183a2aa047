package ledger

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHoldCauseSurvivesRestart: a hold's cause and observed pin are in its
// journal record, and read back both by replaying the journal and from the
// checkpoint of a clean close.
func TestHoldCauseSurvivesRestart(t *testing.T) {
	for _, mode := range []string{"checkpoint", "replay"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			ctx := context.Background()
			l, err := Open(ctx, Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if mode == "checkpoint" {
				l.closeCheckpointMin = 1 // a checkpoint at Close, however short the journal
			}
			c := call("refund", 1, "refund_customer", `{"amount":5}`)
			h, err := l.NewHold(ctx, c, HoldSpec{Reason: "pin changed", Cause: "approval,pin", ObservedPin: "0c1f", Expires: time.Now().Add(time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if mode == "replay" {
				if err := os.Remove(filepath.Join(dir, checkpointName)); err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
			}
			l2 := openT(t, Options{Dir: dir})
			got, ok := l2.GetHold(h.ID)
			if !ok || got.Cause != "approval,pin" || got.ObservedPin != "0c1f" {
				t.Fatalf("after restart: %+v", got)
			}
		})
	}
}

// TestNewHoldFindsOnlyACoveringHold: an open hold for the same call is found
// again only when it stands for every cause asked for and saw the same pin
// value; otherwise a new hold is made and becomes the call's hold.
func TestNewHoldFindsOnlyACoveringHold(t *testing.T) {
	ctx := context.Background()
	exp := time.Now().Add(time.Hour)
	tests := []struct {
		name       string
		first      HoldSpec
		approve    bool
		then       HoldSpec
		wantSameID bool
	}{
		{"same cause", HoldSpec{Cause: "approval"}, false, HoldSpec{Cause: "approval"}, true},
		{"legacy reads as approval", HoldSpec{}, false, HoldSpec{Cause: "approval"}, true},
		{"superset covers", HoldSpec{Cause: "violation:max_calls,approval"}, true, HoldSpec{Cause: "approval"}, true},
		{"approval does not cover max_calls", HoldSpec{Cause: "approval"}, true, HoldSpec{Cause: "violation:max_calls,approval"}, false},
		{"legacy does not cover on_error", HoldSpec{}, false, HoldSpec{Cause: "on_error"}, false},
		{"other pin value", HoldSpec{Cause: "pin", ObservedPin: "a"}, true, HoldSpec{Cause: "pin", ObservedPin: "b"}, false},
		{"same pin value", HoldSpec{Cause: "pin", ObservedPin: "a"}, false, HoldSpec{Cause: "pin", ObservedPin: "a"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := openT(t, Options{Dir: t.TempDir()})
			c := call("email", 2, "send_email", `{"to":"a"}`)
			tt.first.Expires, tt.then.Expires = exp, exp
			h1, err := l.NewHold(ctx, c, tt.first)
			if err != nil {
				t.Fatal(err)
			}
			if tt.approve {
				if _, err := l.UpdateHold(ctx, h1.ID, HoldUpdate{State: HoldApproved}); err != nil {
					t.Fatal(err)
				}
			}
			h2, err := l.NewHold(ctx, c, tt.then)
			if err != nil {
				t.Fatal(err)
			}
			if (h2.ID == h1.ID) != tt.wantSameID {
				t.Fatalf("second hold %s, first %s, want same %v", h2.ID, h1.ID, tt.wantSameID)
			}
			if found, _ := l.FindHold(c); found.ID != h2.ID {
				t.Fatalf("FindHold = %s, want the newest %s", found.ID, h2.ID)
			}
			if !tt.wantSameID {
				if old, _ := l.GetHold(h1.ID); tt.approve && old.State != HoldApproved {
					t.Fatalf("the older approval changed: %s", old.State)
				}
			}
		})
	}
}

// TestNoDowngradePerSignedPath: the high-water mark is kept per signed path
// and trust policy, never per plan label, so an older plan for the same
// path is refused whatever its label, and two plans with one label from
// different paths do not refuse each other; the mark survives a restart
// (checkpoint or replay), and a mark recorded without a trust policy
// binds every policy.
func TestNoDowngradePerSignedPath(t *testing.T) {
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	const trust, other = "key:sha256:aa", "keyless:bb"
	for _, mode := range []string{"checkpoint", "replay"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			ctx := context.Background()
			l, err := Open(ctx, Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if mode == "checkpoint" {
				l.closeCheckpointMin = 1 // a checkpoint at Close, however short the journal
			}
			for _, p := range []PlanLoad{
				{Name: "refund", Digest: "d2", SignedAt: base.Add(time.Hour), Path: "plans/refund.hcl", Trust: trust},
				// As a planlock before trust policies recorded it.
				{Name: "legacy", Digest: "d6", SignedAt: base.Add(time.Hour), Path: "plans/legacy.hcl"},
			} {
				if err := l.LoadPlan(ctx, p); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if mode == "replay" {
				if err := os.Remove(filepath.Join(dir, checkpointName)); err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
			}
			l = openT(t, Options{Dir: dir})
			tests := []struct {
				name string
				load PlanLoad
				want string // "" for accepted
			}{
				{"older, other label, same path", PlanLoad{Name: "refund-old", Digest: "d1", SignedAt: base, Path: "plans/refund.hcl", Trust: trust},
					`plan "refund-old" (signed path plans/refund.hcl) signed at 2026-11-01T00:00:00Z is older than a plan already loaded from the same path (signed at 2026-11-01T01:00:00Z); refusing a downgrade`},
				{"older, same label, other path", PlanLoad{Name: "refund", Digest: "d1", SignedAt: base, Path: "plans/other.hcl", Trust: trust}, ""},
				{"older, other label, other path", PlanLoad{Name: "other", Digest: "d3", SignedAt: base, Path: "plans/third.hcl", Trust: trust}, ""},
				{"older, same path, another trust policy", PlanLoad{Name: "refund", Digest: "d1", SignedAt: base, Path: "plans/refund.hcl", Trust: other}, ""},
				{"newer, other label, same path", PlanLoad{Name: "renamed", Digest: "d4", SignedAt: base.Add(2 * time.Hour), Path: "plans/refund.hcl", Trust: trust}, ""},
				{"between, first label, same path", PlanLoad{Name: "refund", Digest: "d5", SignedAt: base.Add(90 * time.Minute), Path: "plans/refund.hcl", Trust: trust},
					`(signed path plans/refund.hcl) signed at 2026-11-01T01:30:00Z is older`},
				{"older than a mark recorded without a trust policy", PlanLoad{Name: "x", Digest: "d7", SignedAt: base, Path: "plans/legacy.hcl", Trust: other},
					`(signed path plans/legacy.hcl) signed at 2026-11-01T00:00:00Z is older`},
				{"no path: the name's mark", PlanLoad{Name: "legacy", Digest: "d8", SignedAt: base},
					`plan "legacy" signed at 2026-11-01T00:00:00Z is older than the one already loaded`},
			}
			for _, tt := range tests {
				err := l.LoadPlan(ctx, tt.load)
				switch {
				case tt.want == "" && err != nil:
					t.Fatalf("%s: %v", tt.name, err)
				case tt.want != "" && (!errors.Is(err, ErrDowngrade) || !strings.Contains(err.Error(), tt.want)):
					t.Fatalf("%s: err %v, want %q", tt.name, err, tt.want)
				}
			}
			snap, err := Inspect(ctx, Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := strings.Join(snap.SignedPaths(), " "), "plans/legacy.hcl plans/other.hcl plans/refund.hcl plans/third.hcl"; got != want {
				t.Fatalf("SignedPaths: %q, want %q", got, want)
			}
		})
	}
}
