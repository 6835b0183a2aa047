package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/planlock/planlock/internal/authn"
)

// TestNoPlanServedSaysWhy: a gateway that starts with no plan served says
// so in one line that names each refused file and why, the state root in
// use and the --state way out, or that the directory holds no plan file.
func TestNoPlanServedSaysWhy(t *testing.T) {
	k := opensslKeys(t, t.TempDir(), "trusted")
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	toks := tokenFile(t, map[string]string{"tok": "ops *"})
	cases := []struct {
		name  string
		setup func(t *testing.T, plans, state string) // before the gateway that is checked
		want  []string                                // parts of the line, besides the state root
	}{
		{"an older plan from the same signed path", func(t *testing.T, plans, state string) {
			k.install(t, filepath.Join(plans, "read-docs.hcl"), planText("read-docs", "newer"), t0.Add(time.Hour))
			r := start(t, Config{PlansDir: plans, RepoDir: "plans", Policy: k.policy, StateDir: state, Authenticators: []authn.Authenticator{toks}})
			waitFor(t, "read-docs served", func() bool { return r.digest("read-docs") != "" })
			r.stop()
			k.install(t, filepath.Join(plans, "read-docs.hcl"), planText("read-docs", "older"), t0)
			if err := os.WriteFile(filepath.Join(plans, "unsigned.hcl"), []byte(planText("unsigned", "g")), 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{
			"no plan served: every plan file was refused",
			filepath.Join("PLANS", "read-docs.hcl") + `: plan`, // slog quotes the label
			"(signed path plans/read-docs.hcl) signed at",
			"refusing a downgrade",
			filepath.Join("PLANS", "unsigned.hcl") + ": ",
			"bundle missing",
			"/readyz answers 503 until a plan is served",
			"give --state DIR",
		}},
		{"an empty plans directory", func(*testing.T, string, string) {}, []string{
			"no plan served: no plan file (*.hcl) in PLANS",
			"/readyz answers 503 until a plan is served",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plans, state := t.TempDir(), t.TempDir()
			tc.setup(t, plans, state)
			r := start(t, Config{PlansDir: plans, RepoDir: "plans", Policy: k.policy, StateDir: state, Authenticators: []authn.Authenticator{toks}})
			waitFor(t, "the no-plan line", func() bool { return strings.Contains(r.log.String(), "no plan served") })
			var line string
			for _, l := range strings.Split(r.log.String(), "\n") {
				if strings.Contains(l, "no plan served") {
					line = l
				}
			}
			for _, w := range tc.want {
				if w = strings.ReplaceAll(w, "PLANS", plans); !strings.Contains(line, w) {
					t.Errorf("the no-plan line lacks %q:\n%s", w, line)
				}
			}
			if !strings.Contains(line, state) {
				t.Errorf("the no-plan line does not name the state root %s:\n%s", state, line)
			}
		})
	}
}
