package statedir

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/proxy/planload"
)

var t0 = time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC)

const trust = "key:sha256:0123"

// oldDir makes <root>/<label> as planlock before identities did: a load
// of path recorded without a trust policy (none when path is ""), calls
// counted for digest.
func oldDir(t *testing.T, root, label, path string, signed time.Time, calls int) string {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(root, label)
	l, err := ledger.Open(ctx, ledger.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if path != "" {
		if err := l.LoadPlan(ctx, ledger.PlanLoad{Name: label, Digest: "sha256:" + label, SignedAt: signed, Path: path}); err != nil {
			t.Fatal(err)
		}
	}
	for range calls {
		if _, err := l.Reserve(ctx, ledger.Reservation{Call: ledger.Call{PlanDigest: "sha256:" + label, Step: "s", Tool: "t"}, MaxCalls: 100}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func calls(t *testing.T, dir, digest string) int {
	t.Helper()
	snap, err := ledger.Inspect(context.Background(), ledger.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return snap.Progress(digest).Calls(0)
}

func TestPrepareNewAndExisting(t *testing.T) {
	root := t.TempDir()
	ctx := context.Background()
	id := planload.Identity{Trust: trust, Path: "plans/refund.hcl"}
	var notices []string
	d, err := Prepare(ctx, Options{Root: root, ID: id, Label: "refund", Log: func(s string) { notices = append(notices, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(d.Path) != root || !strings.HasPrefix(filepath.Base(d.Path), "refund.hcl-") || len(notices) != 0 {
		t.Fatalf("new directory %s, notices %v", d.Path, notices)
	}
	again, err := Prepare(ctx, Options{Root: root, ID: id, Label: "another-label"})
	if err != nil || again.Path != d.Path {
		t.Fatalf("the same identity under another label: %v %v", again, err)
	}
	cases := []planload.Identity{
		{Trust: "keyless:ff", Path: id.Path}, // another trust policy
		{Trust: trust, Path: "plans/other/refund.hcl"},
		{Path: "/abs/plans/refund.hcl"}, // unverified: the file's path
	}
	for _, other := range cases {
		o, err := Prepare(ctx, Options{Root: root, ID: other, Label: "refund"})
		if err != nil || o.Path == d.Path {
			t.Fatalf("%v: %v %v, want a directory of its own", other, o, err)
		}
	}
	// A directory whose identity file names another identity is refused.
	if err := writeIdentity(d.Path, identityFile{Trust: "keyless:ee", Path: id.Path}); err != nil {
		t.Fatal(err)
	}
	if _, err := Prepare(ctx, Options{Root: root, ID: id}); err == nil || !strings.Contains(err.Error(), "is kept for") {
		t.Fatalf("tampered identity file: %v", err)
	}
}

// TestPrepareMigrates: which directory of the label layout moves, and
// which marks are carried over.
func TestPrepareMigrates(t *testing.T) {
	ctx := context.Background()
	id := planload.Identity{Trust: trust, Path: "plans/refund.hcl"}
	t.Run("the newest mark's directory, whatever the label", func(t *testing.T) {
		root := t.TempDir()
		oldDir(t, root, "refund", id.Path, t0.Add(time.Hour), 3)
		oldDir(t, root, "refund-wide", id.Path, t0, 1)
		var notices []string
		d, err := Prepare(ctx, Options{Root: root, ID: id, Label: "refund-wide", Log: func(s string) { notices = append(notices, s) }})
		if err != nil {
			t.Fatal(err)
		}
		if len(notices) != 1 || !strings.Contains(notices[0], filepath.Join(root, "refund")+" moved to "+d.Path) {
			t.Fatalf("notices %q", notices)
		}
		if got := calls(t, d.Path, "sha256:refund"); got != 3 {
			t.Fatalf("calls after the move: %d, want 3", got)
		}
		l, err := ledger.Open(ctx, ledger.Options{Dir: d.Path})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if err := d.Carry(ctx, l); err != nil {
			t.Fatal(err)
		}
		err = l.LoadPlan(ctx, ledger.PlanLoad{Name: "refund-wide", SignedAt: t0, Path: id.Path, Trust: trust})
		if !errors.Is(err, ledger.ErrDowngrade) {
			t.Fatalf("the older plan after the move: %v", err)
		}
	})
	t.Run("a label directory of another path stays; its mark of this path is carried", func(t *testing.T) {
		root := t.TempDir()
		mixed := oldDir(t, root, "refund", "plans/other.hcl", t0, 2)
		// The same directory also saw this path, newer.
		l, err := ledger.Open(ctx, ledger.Options{Dir: mixed})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.LoadPlan(ctx, ledger.PlanLoad{Name: "refund", SignedAt: t0.Add(time.Hour), Path: id.Path}); err != nil {
			t.Fatal(err)
		}
		l.Close()
		d, err := Prepare(ctx, Options{Root: root, ID: id, Label: "refund"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(mixed); err != nil {
			t.Fatalf("a directory holding another path's state was moved: %v", err)
		}
		l, err = ledger.Open(ctx, ledger.Options{Dir: d.Path})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if err := d.Carry(ctx, l); err != nil {
			t.Fatal(err)
		}
		if err := l.LoadPlan(ctx, ledger.PlanLoad{Name: "x", SignedAt: t0, Path: id.Path, Trust: trust}); !errors.Is(err, ledger.ErrDowngrade) {
			t.Fatalf("carried mark: %v", err)
		}
		// Carried once: the identity file forgets it.
		idf, err := readIdentity(d.Path)
		if err != nil || len(idf.Carry) != 0 {
			t.Fatalf("identity after Carry: %+v %v", idf, err)
		}
	})
	t.Run("an unverified plan takes only a directory without marks", func(t *testing.T) {
		root := t.TempDir()
		oldDir(t, root, "signed", id.Path, t0, 1)
		oldDir(t, root, "plain", "", t0, 4)
		u := planload.Identity{Path: "/abs/signed.hcl"}
		d, err := Prepare(ctx, Options{Root: root, ID: u, Label: "signed"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(root, "signed")); err != nil {
			t.Fatalf("a signed plan's directory went to an unverified plan: %v", err)
		}
		p, err := Prepare(ctx, Options{Root: root, ID: planload.Identity{Path: "/abs/plain.hcl"}, Label: "plain"})
		if err != nil || p.Path == d.Path {
			t.Fatal(err)
		}
		if got := calls(t, p.Path, "sha256:plain"); got != 4 {
			t.Fatalf("unverified plan's calls after the move: %d, want 4", got)
		}
	})
	t.Run("a directory in use is not moved", func(t *testing.T) {
		root := t.TempDir()
		dir := oldDir(t, root, "refund", id.Path, t0, 1)
		l, err := ledger.Open(ctx, ledger.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if _, err := Prepare(ctx, Options{Root: root, ID: id, Label: "refund"}); !errors.Is(err, ledger.ErrLocked) {
			t.Fatalf("in use: %v", err)
		}
		if _, err := os.Stat(filepath.Join(root, Name(id))); !os.IsNotExist(err) {
			t.Fatalf("a directory was made for it: %v", err)
		}
	})
	t.Run("an unreadable label directory stops the start", func(t *testing.T) {
		root := t.TempDir()
		dir := oldDir(t, root, "refund", id.Path, t0, 1)
		if err := os.Remove(filepath.Join(dir, "head")); err != nil { // the anchor
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "audit.jsonl"), []byte("not a journal\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Prepare(ctx, Options{Root: root, ID: id, Label: "refund"}); err == nil || !strings.Contains(err.Error(), "cannot be read") {
			t.Fatalf("unreadable: %v", err)
		}
	})
}

// TestPrepareFinishesAnInterruptedMove: a crash after the identity file
// and the binding were written, before the rename, is finished by the next
// start with nothing lost; the half-moved directory cannot be opened
// meanwhile (its binding names the target).
func TestPrepareFinishesAnInterruptedMove(t *testing.T) {
	ctx := context.Background()
	id := planload.Identity{Trust: trust, Path: "plans/refund.hcl"}
	root := t.TempDir()
	dir := oldDir(t, root, "refund", id.Path, t0.Add(time.Hour), 5)
	target := filepath.Join(root, Name(id))
	// What MoveDir writes before its rename.
	if err := writeIdentity(dir, identityFile{Trust: id.Trust, Path: id.Path}); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]string{"audit": filepath.Join(target, "audit.jsonl")})
	if err := os.WriteFile(filepath.Join(dir, "ledger.json"), append(b, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.Open(ctx, ledger.Options{Dir: dir}); !errors.Is(err, ledger.ErrBinding) {
		t.Fatalf("the half-moved directory opened: %v", err)
	}
	// Relabelled meanwhile: the move is still found and finished.
	d, err := Prepare(ctx, Options{Root: root, ID: id, Label: "relabelled"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Path != target {
		t.Fatalf("prepared %s, want %s", d.Path, target)
	}
	if got := calls(t, d.Path, "sha256:refund"); got != 5 {
		t.Fatalf("calls after the finished move: %d, want 5", got)
	}
	l, err := ledger.Open(ctx, ledger.Options{Dir: d.Path})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.LoadPlan(ctx, ledger.PlanLoad{Name: "relabelled", SignedAt: t0, Path: id.Path, Trust: trust}); !errors.Is(err, ledger.ErrDowngrade) {
		t.Fatalf("older plan after the finished move: %v", err)
	}
}
