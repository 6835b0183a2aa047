package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/planlock/planlock/internal/statedir"
	"github.com/planlock/planlock/internal/testkit/pgtest"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/sign"
)

// cmdStateDir sets an environment variable to the state directory under a
// state root kept for a plan's path (the signed path, or for an unverified
// plan the file's absolute path, which is matched by its end):
//
//	statedir DIR state plans/notes.hcl
func cmdStateDir(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: statedir NAME ROOT PATH")
	}
	root := ts.MkAbs(args[1])
	ents, err := os.ReadDir(root)
	ts.Check(err)
	var found []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(root, e.Name(), statedir.IdentityName))
		if err != nil {
			continue
		}
		var id struct{ Path string }
		ts.Check(json.Unmarshal(b, &id))
		if id.Path == args[2] || strings.HasSuffix(id.Path, string(filepath.Separator)+args[2]) {
			found = append(found, filepath.Join(args[1], e.Name()))
		}
	}
	if len(found) != 1 {
		ts.Fatalf("statedir: %d state directories for %s under %s: %v", len(found), args[2], args[1], found)
	}
	ts.Setenv(args[0], found[0])
}

// identityKit signs plans with a real key pair (planlock keygen) at chosen
// times, so that the no-downgrade rule has an exact order to compare.
type identityKit struct {
	dir, pub string
	sign     func(t *testing.T, file, path string, at time.Time)
}

func newIdentityKit(t *testing.T) identityKit {
	t.Helper()
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	if code, _, e := planlockRun(t, "keygen", "--out-dir", keys, "--name", "ci"); code != 0 {
		t.Fatalf("keygen: %s", e)
	}
	kp, err := sign.LoadSigningKey(context.Background(), filepath.Join(keys, "ci.key"), os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	k := identityKit{dir: dir, pub: filepath.Join(keys, "ci.pub")}
	k.sign = func(t *testing.T, file, path string, at time.Time) {
		t.Helper()
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		s, err := sign.Sign(context.Background(), src, sign.Predicate{Kind: sign.KindPlan, Path: path},
			sign.SignOptions{Keypair: kp, Now: func() time.Time { return at }})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(sign.BundlePath(file), s.Bundle, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

// identityPlan is a plan labelled label; wide allows any message, the
// narrow one only "ok".
func identityPlan(label string, wide bool) string {
	arg := `arg "message" { eq = "ok" }`
	if wide {
		arg = `arg "message" { any = true }`
	}
	return `plan "` + label + `" {
  goal  = "echo"
  order = "any"
  step "say" {
    tool = "echo"
    ` + arg + `
  }
}
`
}

// place writes a plan file and signs it for the repository path at.
func (k identityKit) place(t *testing.T, file, content, path string, at time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	k.sign(t, file, path, at)
}

// proxyOnce starts planlock proxy on file (signed for path) with the
// given state flags; stdin is empty, so a proxy that starts ends at once.
func (k identityKit) proxyOnce(t *testing.T, file, path string, state ...string) (int, string) {
	t.Helper()
	args := append([]string{"proxy", "--plan", file, "--path", path, "--key", k.pub, "--reload-interval", "0"}, state...)
	code, _, errs := planlockRun(t, append(args, "--", "sh", "-c", "exit 0")...)
	return code, errs
}

// TestProxyNoDowngradeSurvivesARelabel: an older, wider plan signed for
// the same repository path is refused after a restart whatever its plan
// label, and whatever the local file is called, in the default state
// root (file state) and in a PostgreSQL state; two plans with one label
// from different signed paths neither share a state nor refuse each other.
func TestProxyNoDowngradeSurvivesARelabel(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC)
	const repoPath = "plans/refund.hcl"
	type load struct {
		file, label, path string
		wide              bool
		at                time.Duration
		refused           bool
	}
	cases := []struct {
		name  string
		loads []load
	}{
		{"relabelled", []load{
			{file: "refund.hcl", label: "refund", path: repoPath, at: 10 * time.Second},
			{file: "refund.hcl", label: "refund-wide", path: repoPath, wide: true, refused: true},
		}},
		{"relabelled and the local file renamed", []load{
			{file: "refund.hcl", label: "refund", path: repoPath, at: 10 * time.Second},
			{file: "elsewhere/old.hcl", label: "legacy", path: repoPath, wide: true, refused: true},
		}},
		{"deleted, then re-added under another label", []load{
			{file: "refund.hcl", label: "refund", path: repoPath, at: 10 * time.Second},
			{file: "", path: repoPath},
			{file: "refund.hcl", label: "other", path: repoPath, wide: true, refused: true},
		}},
		{"the newer plan again after the refusal", []load{
			{file: "refund.hcl", label: "refund", path: repoPath, at: 10 * time.Second},
			{file: "refund.hcl", label: "refund-wide", path: repoPath, wide: true, refused: true},
			{file: "refund.hcl", label: "refund", path: repoPath, at: 10 * time.Second},
		}},
		{"two plans with one label from different paths", []load{
			{file: "a.hcl", label: "shared", path: "plans/a.hcl", at: 10 * time.Second},
			{file: "b.hcl", label: "shared", path: "plans/b.hcl", wide: true},
			{file: "a.hcl", label: "shared", path: "plans/a.hcl", at: 10 * time.Second},
		}},
	}
	states := []struct {
		name  string
		flags func(t *testing.T) []string
	}{
		{"state root", func(t *testing.T) []string { return []string{"--state-root", t.TempDir()} }},
		{"postgres", func(t *testing.T) []string {
			url := pgtest.Start(t).NewDatabase(t)
			if code, _, e := planlockRun(t, "state", "migrate", "--state", url); code != 0 {
				t.Fatalf("state migrate: %s", e)
			}
			return []string{"--state", url, "--state-root", t.TempDir()}
		}},
	}
	for _, st := range states {
		for _, tc := range cases {
			t.Run(st.name+"/"+tc.name, func(t *testing.T) {
				k := newIdentityKit(t)
				flags := st.flags(t)
				for i, l := range tc.loads {
					if l.file == "" {
						for _, f := range []string{"refund.hcl", "a.hcl", "b.hcl"} {
							_ = os.Remove(filepath.Join(k.dir, f))
							_ = os.Remove(sign.BundlePath(filepath.Join(k.dir, f)))
						}
						continue
					}
					file := filepath.Join(k.dir, l.file)
					k.place(t, file, identityPlan(l.label, l.wide), l.path, t0.Add(l.at))
					code, errs := k.proxyOnce(t, file, l.path, flags...)
					switch {
					case l.refused && (code != 1 || !strings.Contains(errs, "refusing a downgrade")):
						t.Fatalf("load %d (%s, plan %q): exit %d, want a downgrade refused:\n%s", i, l.path, l.label, code, errs)
					case !l.refused && code != 0:
						t.Fatalf("load %d (%s, plan %q): exit %d, want it served:\n%s", i, l.path, l.label, code, errs)
					}
				}
			})
		}
	}
}

// oldLayoutState builds a state directory as planlock kept it before state
// identities: <root>/<label>, its plan loads recorded without a trust
// policy, with calls counted and a hold pending.
func oldLayoutState(t *testing.T, root, label, digest, path string, signed time.Time, calls int) {
	t.Helper()
	ctx := context.Background()
	l, err := ledger.Open(ctx, ledger.Options{Dir: filepath.Join(root, label)})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.LoadPlan(ctx, ledger.PlanLoad{Name: label, Digest: digest, SignedAt: signed, Path: path}); err != nil {
		t.Fatal(err)
	}
	call := ledger.Call{PlanDigest: digest, Step: "say", StepIndex: 0, Tool: "echo", Args: json.RawMessage(`{"message":"ok"}`)}
	for range calls {
		if _, err := l.Reserve(ctx, ledger.Reservation{Call: call, MaxCalls: 100}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.NewHold(ctx, call, ledger.HoldSpec{Reason: "r", Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestProxyMigratesTheLabelLayout: a state root laid out per plan label
// is migrated once, with a one-line notice: the directory holding the
// signed path's newest mark moves (counts and holds with it) whatever
// label the plan now has, so the older plan is refused on the very first
// start after the upgrade; the newer plan then runs on the moved state.
func TestProxyMigratesTheLabelLayout(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC)
	const repoPath = "plans/refund.hcl"
	k := newIdentityKit(t)
	root := t.TempDir()
	newer, older := identityPlan("refund", false), identityPlan("refund-wide", true)
	newerDigest := "sha256:" + sign.Digest([]byte(newer))
	oldLayoutState(t, root, "refund", newerDigest, repoPath, t0.Add(10*time.Second), 3)
	oldLayoutState(t, root, "refund-wide", "sha256:"+sign.Digest([]byte(older)), repoPath, t0, 1)
	file := filepath.Join(k.dir, "refund.hcl")

	// First start after the upgrade: the older plan, under its own label.
	k.place(t, file, older, repoPath, t0)
	code, errs := k.proxyOnce(t, file, repoPath, "--state-root", root)
	if code != 1 || !strings.Contains(errs, "refusing a downgrade") {
		t.Fatalf("older plan on the first start: exit %d, want a downgrade refused:\n%s", code, errs)
	}
	if n := strings.Count(errs, "(a one-time migration)"); n != 1 {
		t.Fatalf("%d migration notices, want 1:\n%s", n, errs)
	}
	if _, err := os.Stat(filepath.Join(root, "refund")); !os.IsNotExist(err) {
		t.Fatalf("the old directory is still there: %v", err)
	}
	k.place(t, file, newer, repoPath, t0.Add(10*time.Second))
	code, errs = k.proxyOnce(t, file, repoPath, "--state-root", root)
	if code != 0 || strings.Contains(errs, "migration") {
		t.Fatalf("newer plan: exit %d (a second notice?):\n%s", code, errs)
	}
	code, errs = k.proxyOnce(t, file, repoPath, "--state-root", root)
	if code != 0 || strings.Contains(errs, "migration") {
		t.Fatalf("newer plan again: exit %d:\n%s", code, errs)
	}
	// The counts and the hold moved with the journal.
	var dirs []string
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join(root, e.Name(), statedir.IdentityName)); err == nil {
			dirs = append(dirs, e.Name())
		}
	}
	if len(dirs) != 1 {
		t.Fatalf("identity directories %v, want one", dirs)
	}
	snap, err := ledger.Inspect(context.Background(), ledger.Options{Dir: filepath.Join(root, dirs[0])})
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Progress(newerDigest).Calls(0); got != 3 {
		t.Fatalf("calls counted after the move: %d, want 3", got)
	}
	if holds := snap.ListHolds(); len(holds) != 1 {
		t.Fatalf("holds after the move: %v", holds)
	}
	if code, out, e := planlockRun(t, "audit", "verify", filepath.Join(root, dirs[0], "audit.jsonl")); code != 0 {
		t.Fatalf("audit verify of the moved journal: %d %s %s", code, out, e)
	}
}
