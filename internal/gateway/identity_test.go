package gateway

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/planlock/planlock/internal/authn"
	"github.com/planlock/planlock/internal/statedir"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/proxy/planload"
)

// TestServeStateIsKeyedByTheSignedPath: a plan's state (and its
// no-downgrade mark) belongs to its signed path and trust policy, not to
// its label: an older plan for the same file is refused under another
// label after a restart and when the file is removed and added again;
// two plans with one label from different files have states of their own
// and do not refuse each other; a file renamed on disk does not verify.
func TestServeStateIsKeyedByTheSignedPath(t *testing.T) {
	k := opensslKeys(t, t.TempDir(), "trusted")
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	toks := tokenFile(t, map[string]string{"tok": "ops *"})
	type step struct {
		do      func(plans string) // changes the plans directory
		restart bool               // stop the gateway, start a new one on the same state
		served  []string           // plan labels served afterwards
		refused map[string]string  // file -> part of the refusal
	}
	install := func(file, label string, at time.Duration) func(string) {
		return func(plans string) {
			k.install(t, filepath.Join(plans, file), planText(label, "g "+label+at.String()), t0.Add(at))
		}
	}
	remove := func(file string) func(string) {
		return func(plans string) {
			for _, f := range []string{file, file + ".sigstore.json"} {
				if err := os.Remove(filepath.Join(plans, f)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"relabelled older plan after a restart", []step{
			{do: install("alpha.hcl", "alpha", time.Hour), served: []string{"alpha"}},
			{do: install("alpha.hcl", "alpha-wide", 0), restart: true, refused: map[string]string{"alpha.hcl": "refusing a downgrade"}},
		}},
		{"removed, then added again under another label", []step{
			{do: install("alpha.hcl", "alpha", time.Hour), served: []string{"alpha"}},
			{do: remove("alpha.hcl")},
			{do: install("alpha.hcl", "other", 0), refused: map[string]string{"alpha.hcl": "refusing a downgrade"}},
		}},
		{"two plans with one label from different files", []step{
			{do: install("a.hcl", "shared", time.Hour), served: []string{"shared"}},
			{do: remove("a.hcl")},
			{do: install("b.hcl", "shared", 0), restart: true, served: []string{"shared"}},
		}},
		{"a file renamed on disk", []step{
			{do: install("alpha.hcl", "alpha", time.Hour), served: []string{"alpha"}},
			{do: func(plans string) {
				for _, f := range []string{"", ".sigstore.json"} {
					if err := os.Rename(filepath.Join(plans, "alpha.hcl"+f), filepath.Join(plans, "beta.hcl"+f)); err != nil {
						t.Fatal(err)
					}
				}
			}, restart: true, refused: map[string]string{"beta.hcl": `the bundle approves "plans/alpha.hcl"`}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plans, state := t.TempDir(), t.TempDir()
			var r *running
			cfg := Config{PlansDir: plans, RepoDir: "plans", Policy: k.policy, StateDir: state, Authenticators: []authn.Authenticator{toks}}
			for i, s := range tc.steps {
				s.do(plans)
				if r == nil || s.restart {
					if r != nil {
						r.stop()
					}
					r = start(t, cfg)
				}
				for file, why := range s.refused {
					waitFor(t, file+" refused", func() bool {
						_, ok := r.g.Refused()[filepath.Join(plans, file)]
						return ok
					})
					if got := r.g.Refused()[filepath.Join(plans, file)]; !strings.Contains(got, why) {
						t.Fatalf("step %d: %s refused with %q, want %q", i, file, got, why)
					}
				}
				for _, label := range s.served {
					waitFor(t, label+" served", func() bool { return r.digest(label) != "" })
				}
				if len(s.served) == 0 {
					waitFor(t, "nothing served", func() bool { return len(r.g.Plans()) == 0 })
				}
			}
			// One state directory per signed path, each naming its identity.
			ents, err := os.ReadDir(state)
			if err != nil {
				t.Fatal(err)
			}
			var dirs []string
			for _, e := range ents {
				if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
					if _, err := os.Stat(filepath.Join(state, e.Name(), statedir.IdentityName)); err != nil {
						t.Fatalf("state directory %s: %v", e.Name(), err)
					}
					dirs = append(dirs, e.Name())
				}
			}
			if want := 1 + strings.Count(tc.name, "two plans"); len(dirs) != want {
				t.Fatalf("state directories %v, want %d", dirs, want)
			}
		})
	}
}

// TestServeMigratesTheLabelLayout: serve on a state directory laid out
// per plan label moves the directory once (one log line), so an older plan
// for the same file under another label is refused at the first start,
// and the counts recorded before are kept.
func TestServeMigratesTheLabelLayout(t *testing.T) {
	k := opensslKeys(t, t.TempDir(), "trusted")
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	ctx := context.Background()
	plans, state := t.TempDir(), t.TempDir()
	// As planlock serve kept it before: <state>/<plan label>.
	old, err := ledger.Open(ctx, ledger.Options{Dir: filepath.Join(state, "alpha")})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.LoadPlan(ctx, ledger.PlanLoad{Name: "alpha", Digest: "sha256:new", SignedAt: t0.Add(time.Hour), Path: "plans/alpha.hcl"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := old.Reserve(ctx, ledger.Reservation{Call: ledger.Call{PlanDigest: "sha256:new", Step: "say", Tool: "echo"}, MaxCalls: 2}); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	k.install(t, filepath.Join(plans, "alpha.hcl"), planText("alpha-wide", "older"), t0)
	toks := tokenFile(t, map[string]string{"tok": "ops *"})
	r := start(t, Config{PlansDir: plans, RepoDir: "plans", Policy: k.policy, StateDir: state, Authenticators: []authn.Authenticator{toks}})
	waitFor(t, "alpha.hcl refused", func() bool {
		_, ok := r.g.Refused()[filepath.Join(plans, "alpha.hcl")]
		return ok
	})
	if got := r.g.Refused()[filepath.Join(plans, "alpha.hcl")]; !strings.Contains(got, "refusing a downgrade") {
		t.Fatalf("refused with %q, want a downgrade", got)
	}
	if n := strings.Count(r.log.String(), "one-time migration"); n != 1 {
		t.Fatalf("%d migration lines, want 1:\n%s", n, r.log.String())
	}
	id := planload.Identity{Trust: k.policy.Fingerprint(), Path: "plans/alpha.hcl"}
	snap, err := ledger.Inspect(ctx, ledger.Options{Dir: filepath.Join(state, statedir.Name(id))})
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Progress("sha256:new").Calls(0); got != 2 {
		t.Fatalf("calls after the move: %d, want 2", got)
	}
}
