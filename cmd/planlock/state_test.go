package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/planlock/planlock/internal/testkit/pgtest"
	"github.com/planlock/planlock/proxy/ledger"
)

func runState(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"planlock"}, args...), streams{in: strings.NewReader(""), out: &out, err: &errb})
	return code, out.String(), errb.String()
}

// state migrate, state copy from a state directory, and audit verify of the
// database's chain, as a user runs them.
func TestStateMigrateCopyVerify(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Start(t).NewDatabase(t)
	dir := filepath.Join(t.TempDir(), "refund")
	l, err := ledger.Open(ctx, ledger.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	call := ledger.Call{PlanDigest: "sha256:p", Step: "s", Tool: "t", Args: json.RawMessage(`{}`)}
	for range 250 {
		if _, err := l.Reserve(ctx, ledger.Reservation{Call: call, MaxCalls: 100000}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.NewHold(ctx, call, ledger.HoldSpec{Reason: "r", Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// No Close: a crashed proxy's open lease is settled by the copy.
	_ = l

	if code, _, errs := runState("state", "copy", "--from", t.TempDir(), "--to", url); code != 1 || !strings.Contains(errs, "no planlock schema") {
		t.Fatalf("copy into an un-migrated database: %d %s", code, errs)
	}
	if code, out, errs := runState("state", "migrate", "--state", url); code != 0 || !strings.Contains(out, "schema version 0 -> 1") {
		t.Fatalf("migrate: %d %q %q", code, out, errs)
	}
	if code, _, errs := runState("state", "copy", "--from", dir, "--to", url); code != 1 || !strings.Contains(errs, "in use") {
		t.Fatalf("copy of a directory in use: %d %s", code, errs)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runState("state", "copy", "--from", dir, "--to", url)
	if code != 0 || !strings.Contains(out, "the same before and after") {
		t.Fatalf("copy: %d %q %q", code, out, errs)
	}
	if code, out, errs := runState("audit", "verify", "--state", url); code != 0 || !strings.HasPrefix(out, "ok: ") {
		t.Fatalf("audit verify --state: %d %q %q", code, out, errs)
	}
	if code, out, _ := runState("audit", "head", "--state", url); code != 0 || !strings.HasPrefix(out, "seq=") {
		t.Fatalf("audit head --state: %d %q", code, out)
	}
	if code, out, errs := runState("holds", "list", "--state", url); code != 0 || !strings.Contains(out, "pending") {
		t.Fatalf("holds list --state: %d %q %q", code, out, errs)
	}
	// A table cut at its end (the append-only trigger turned off by its owner).
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "ALTER TABLE planlock_audit DISABLE TRIGGER USER; DELETE FROM planlock_audit WHERE seq = (SELECT max(seq) FROM planlock_audit)"); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runState("audit", "verify", "--state", url); code != 1 || !strings.Contains(errs, "truncated") {
		t.Fatalf("audit verify of a cut table: %d %q", code, errs)
	}
}

// audit export --state of a database that state copy filled writes the
// same lines as audit export of the source directory.
func TestAuditExportStateMatchesDirectory(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Start(t).NewDatabase(t)
	dir := filepath.Join(t.TempDir(), "refund")
	l, err := ledger.Open(ctx, ledger.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	call := ledger.Call{PlanDigest: "sha256:p", Step: "s", Tool: "t", Args: json.RawMessage(`{"a":"<b>"}`)}
	for range 250 {
		tk, err := l.Reserve(ctx, ledger.Reservation{Call: call, MaxCalls: 100000})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Complete(ctx, tk, ledger.Outcome{OK: true}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.NewHold(ctx, call, ledger.HoldSpec{Reason: "r", Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runState("state", "migrate", "--state", url); code != 0 {
		t.Fatalf("migrate: %s", errs)
	}
	if code, _, errs := runState("state", "copy", "--from", dir, "--to", url); code != 0 {
		t.Fatalf("copy: %s", errs)
	}
	for _, from := range []string{"1", "200"} {
		code, fromDir, errs := runState("audit", "export", "--from-seq", from, dir)
		if code != 0 {
			t.Fatalf("export of the directory: %s", errs)
		}
		code, fromDB, errs := runState("audit", "export", "--from-seq", from, "--state", url)
		if code != 0 {
			t.Fatalf("export --state: %s", errs)
		}
		if fromDB != fromDir || !strings.Contains(fromDB, `"schema":"planlock.audit.v1"`) || strings.Count(fromDB, "\n") < 100 {
			t.Fatalf("--from-seq %s: the exports differ or are empty:\n%.300s\n---\n%.300s", from, fromDir, fromDB)
		}
	}
	if code, _, errs := runState("audit", "export", "--state", url, dir); code == 0 || !strings.Contains(errs, "no FILE") {
		t.Fatalf("--state and a FILE: %d %q", code, errs)
	}
	// A cut table: nothing is written, exit status 1.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "ALTER TABLE planlock_audit DISABLE TRIGGER USER; DELETE FROM planlock_audit WHERE seq = (SELECT max(seq) FROM planlock_audit)"); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runState("audit", "export", "--state", url); code != 1 || out != "" || !strings.Contains(errs, "truncated") {
		t.Fatalf("export of a cut table: %d %q %q", code, out, errs)
	}
}

// audit verify --state postgres://... --state-key checks the MAC of every
// record copied into the database: the state's own key verifies, another
// key is refused with the record named, and without a key only the chain
// is checked.
func TestAuditVerifyStateWithStateKey(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Start(t).NewDatabase(t)
	keys := t.TempDir()
	good, other := filepath.Join(keys, "state.key"), filepath.Join(keys, "other.key")
	for _, k := range []string{good, other} {
		if code, _, errs := runState("keygen", "--state-key", k); code != 0 {
			t.Fatalf("keygen --state-key %s: %s", k, errs)
		}
	}
	key, err := ledger.ReadStateKey(good)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "refund")
	l, err := ledger.Open(ctx, ledger.Options{Dir: dir, StateKey: key})
	if err != nil {
		t.Fatal(err)
	}
	call := ledger.Call{PlanDigest: "sha256:p", Step: "s", Tool: "t", Args: json.RawMessage(`{}`)}
	for range 20 {
		tk, err := l.Reserve(ctx, ledger.Reservation{Call: call, MaxCalls: 100})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Complete(ctx, tk, ledger.Outcome{OK: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runState("state", "migrate", "--state", url); code != 0 {
		t.Fatalf("migrate: %s", errs)
	}
	if code, _, errs := runState("state", "copy", "--from", dir, "--to", url); code != 1 || !strings.Contains(errs, "state key") {
		t.Fatalf("copy of a keyed state without its key: %d %q", code, errs)
	}
	if code, _, errs := runState("state", "copy", "--from", dir, "--to", url, "--state-key", good); code != 0 {
		t.Fatalf("copy --state-key: %s", errs)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"its key", []string{"--state-key", good}, 0, "ok: "},
		{"no key: the chain only", nil, 0, "ok: "},
		{"another key", []string{"--state-key", other}, 1, "record 1: its state MAC does not verify with state key"},
		{"no such key file", []string{"--state-key", filepath.Join(keys, "missing.key")}, 1, "audit verify: --state-key: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := runState(append([]string{"audit", "verify", "--state", url}, c.args...)...)
			if code != c.code || !strings.Contains(out+errs, c.want) {
				t.Fatalf("audit verify --state %v: %d %q %q, want %d and %q", c.args, code, out, errs, c.code, c.want)
			}
		})
	}
}
