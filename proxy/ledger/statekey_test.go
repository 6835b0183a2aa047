package ledger

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The attacker of these tests can write the whole state directory (the
// journal, the anchor, checkpoint.json) but does not have the state key,
// kept elsewhere.

func newKey(t testing.TB) *StateKey {
	t.Helper()
	b := make([]byte, StateKeySize)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	k, err := ParseStateKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// orderedUse makes dir's state under key: step "a" (max_calls 1) used
// and not done (its call failed), so an ordered step 1 stays locked.
func orderedUse(t *testing.T, dir string, key *StateKey, checkpoint bool) {
	t.Helper()
	ctx := context.Background()
	l := openT(t, Options{Dir: dir, StateKey: key})
	if checkpoint {
		l.closeCheckpointMin = 1
	}
	tk, err := l.Reserve(ctx, Reservation{Call: call("a", 0, "t", ""), MaxCalls: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Complete(ctx, tk, Outcome{OK: false, Err: "upstream failed"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// afterA is the order rule of step 1: step 0 must be done.
func afterA(p Progress) error {
	if !p.Done(0) {
		return errors.New("step a is not done")
	}
	return nil
}

// TestStateKeyRefusesForgedRecords: with a state key, a record appended
// by someone without the key (an outcome that marks a step done and
// unlocks the next, a lease that gives calls back, one with a MAC under
// another key) makes start fail with a one-line error naming the record,
// and fails audit verify given the key. Without a key the same outcome is
// taken, as before the key existed: that attacker is not withstood.
func TestStateKeyRefusesForgedRecords(t *testing.T) {
	ctx := context.Background()
	i0 := 0
	ok := true
	outcome := record{Time: time.Now().UTC(), Type: typeOutcome, Plan: digest, Step: "a", StepIndex: &i0, Tool: "t", Ref: 1, OK: &ok}
	lease := record{Time: time.Now().UTC(), Type: typeLease, Plan: digest, Step: "a", StepIndex: &i0, Tool: "t", Max: 5, Through: 0, Note: "lease returned"}
	tests := []struct {
		name  string
		forge func(t *testing.T, path string)
		want  string
	}{
		{"outcome without a MAC", func(t *testing.T, path string) { forgeAppend(t, path, outcome) }, "has no state MAC"},
		{"lease return without a MAC", func(t *testing.T, path string) { forgeAppend(t, path, lease) }, "has no state MAC"},
		{"outcome with a MAC under another key", func(t *testing.T, path string) {
			forgeKeyed(t, path, newKey(t), outcome)
		}, "does not verify with state key"},
	}
	for _, checkpoint := range []bool{false, true} {
		for _, tt := range tests {
			name := tt.name
			if checkpoint {
				name += ", after a checkpoint"
			}
			t.Run(name, func(t *testing.T) {
				dir := t.TempDir()
				key := newKey(t)
				orderedUse(t, dir, key, checkpoint)
				path := filepath.Join(dir, auditName)
				tt.forge(t, path)
				l, err := Open(ctx, Options{Dir: dir, StateKey: key})
				if err == nil {
					_, rerr := l.Reserve(ctx, Reservation{Call: call("b", 1, "t", ""), MaxCalls: 1, Check: afterA})
					l.Close()
					t.Fatalf("Open took the forged record; the ordered step after it: %v", rerr)
				}
				t.Logf("Open: %v", err)
				if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path+": line ") || strings.Contains(err.Error(), "\n") {
					t.Fatalf("Open: %v, want one line naming %s and a line, with %q", err, path, tt.want)
				}
				f, err := os.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if _, err := VerifyWith(f, key); err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("VerifyWith: %v, want %q", err, tt.want)
				}
				files, err := OpenSeries(dir)
				if err != nil {
					t.Fatal(err)
				}
				defer CloseFiles(files)
				if _, _, err := VerifyFilesWith(files, nil, key); err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("VerifyFilesWith: %v, want %q", err, tt.want)
				}
			})
		}
	}

	t.Run("without a key the forged outcome is taken, as before", func(t *testing.T) {
		dir := t.TempDir()
		orderedUse(t, dir, nil, false)
		forgeAppend(t, filepath.Join(dir, auditName), outcome)
		l := openT(t, Options{Dir: dir})
		if _, err := l.Reserve(ctx, Reservation{Call: call("b", 1, "t", ""), MaxCalls: 1, Check: afterA}); err != nil {
			t.Fatalf("without a key: %v; want the forged outcome taken (documented: no key, no such guarantee)", err)
		}
	})
}

// forgeKeyed appends records with MACs under key.
func forgeKeyed(t *testing.T, path string, key *StateKey, recs ...record) {
	t.Helper()
	_, seq, head := journalTail(t, path)
	var out []byte
	for i := range recs {
		body, err := encodeBody(&recs[i])
		if err != nil {
			t.Fatal(err)
		}
		seq++
		out, head = appendKeyedLine(out, seq, head, body, key)
	}
	appendFile(t, path, out)
}

// stripMACs rewrites the journal at path without MACs, chained again.
func stripMACs(t *testing.T, path string) {
	t.Helper()
	var out []byte
	head := genesis
	for i, line := range bytes.Split(bytes.TrimSuffix(mustRead(t, path), []byte("\n")), []byte("\n")) {
		prefix, _ := splitMAC(line[:len(line)-hashSuffixLen])
		seq := uint64(i + 1)
		header := len(`{"seq":`) + len(strconv.FormatUint(seq, 10)) + len(`,"prev":"`) + 64 + len(`",`)
		out, head = appendLine(out, seq, head, prefix[header:])
	}
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestStateKeyCannotBeDropped: a keyed state opened without its key, with
// another key, or with every MAC stripped (and the anchor rewritten) is
// refused; a state written before the key was configured is taken only
// when told, once, and from then on a record without a MAC is refused.
func TestStateKeyCannotBeDropped(t *testing.T) {
	ctx := context.Background()
	key := newKey(t)
	tests := []struct {
		name    string
		prepare func(t *testing.T, dir string)
		o       Options
		want    string
	}{
		{"no key", func(t *testing.T, dir string) { orderedUse(t, dir, key, false) }, Options{}, "carries a state MAC but no state key is given"},
		{"another key", func(t *testing.T, dir string) { orderedUse(t, dir, key, false) }, Options{StateKey: newKey(t)}, "does not verify with state key"},
		{"every MAC stripped, anchor and checkpoint rewritten", func(t *testing.T, dir string) {
			orderedUse(t, dir, key, false)
			path := filepath.Join(dir, auditName)
			stripMACs(t, path)
			os.Remove(filepath.Join(dir, checkpointName))
			os.Remove(filepath.Join(dir, anchorName))
		}, Options{StateKey: key, AcceptMissingAnchor: true}, "none carries a MAC of state key"},
		{"state written before the key, not accepted", func(t *testing.T, dir string) { orderedUse(t, dir, nil, false) }, Options{StateKey: key}, "start once with --accept-unkeyed-state"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.prepare(t, dir)
			tt.o.Dir = dir
			l, err := Open(ctx, tt.o)
			if err == nil {
				l.Close()
				t.Fatal("Open took the state")
			}
			if !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Open: %v, want one line with %q", err, tt.want)
			}
		})
	}

	t.Run("state written before the key, accepted once", func(t *testing.T) {
		dir := t.TempDir()
		orderedUse(t, dir, nil, false)
		l := openT(t, Options{Dir: dir, StateKey: key, AcceptUnkeyedState: true})
		if p := l.Progress(digest); p.Calls(0) != 1 {
			t.Fatalf("calls of step a after the key was introduced: %d, want 1", p.Calls(0))
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, auditName)
		recs := readRecords(t, path)
		if r := recs[len(recs)-1]; r.Type != typeStateKey || r.MAC == "" || !strings.Contains(r.Note, key.ID()) {
			t.Fatalf("last record %+v, want the state_key record with a MAC", r)
		}
		// Without the flag from now on; the unkeyed records before the
		// state_key record are vouched for by its MAC.
		l = openT(t, Options{Dir: dir, StateKey: key})
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		i0 := 0
		ok := true
		forgeAppend(t, path, record{Time: time.Now().UTC(), Type: typeOutcome, Plan: digest, Step: "a", StepIndex: &i0, Tool: "t", Ref: 1, OK: &ok})
		for _, accept := range []bool{false, true} {
			if l, err := Open(ctx, Options{Dir: dir, StateKey: key, AcceptUnkeyedState: accept}); err == nil {
				l.Close()
				t.Fatalf("accept %v: Open took an unkeyed record after the state_key record", accept)
			} else if !strings.Contains(err.Error(), "has no state MAC") {
				t.Fatalf("accept %v: Open: %v", accept, err)
			}
		}
	})
}

// TestReadStateKey: a key file inside the state directory, readable by
// others, or of the wrong size is refused with one line.
func TestReadStateKey(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	good := make([]byte, StateKeySize)
	if _, err := rand.Read(good); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		data []byte
		mode os.FileMode
		want string // "" accepted
	}{
		{"raw key outside", filepath.Join(dir, "k1"), good, 0o600, ""},
		{"hex key outside", filepath.Join(dir, "k2"), []byte(strings.Repeat("ab01", 16) + "\n"), 0o400, ""},
		{"inside the state directory", filepath.Join(state, "key"), good, 0o600, "inside the state directory"},
		{"readable by others", filepath.Join(dir, "k3"), good, 0o644, "chmod 600"},
		{"too short", filepath.Join(dir, "k4"), good[:16], 0o600, "a state key is 32 bytes"},
		{"one byte repeated", filepath.Join(dir, "k5"), make([]byte, StateKeySize), 0o600, "one byte repeated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(tt.path, tt.data, tt.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(tt.path, tt.mode); err != nil {
				t.Fatal(err)
			}
			k, err := ReadStateKey(tt.path, state)
			if tt.want == "" {
				if err != nil || k.ID() == "" {
					t.Fatalf("ReadStateKey: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("ReadStateKey: %v, want one line with %q", err, tt.want)
			}
		})
	}
}

// TestStateKeyAcrossRotation: the segment records of a rotated journal
// carry their MAC: the journal opens again under the key and the series
// verifies with it; a record appended without one is refused.
func TestStateKeyAcrossRotation(t *testing.T) {
	dir := t.TempDir()
	key := newKey(t)
	o := Options{Dir: dir, RotateSize: 1, SyncEachCall: true, StateKey: key}
	l := openT(t, o)
	reserveCalls(t, l, 5, 10)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l.Stats().Rotations < 2 {
		t.Fatalf("Rotations = %d, want several", l.Stats().Rotations)
	}
	files := seriesOf(t, l.AuditPath())
	open := func() []*os.File {
		var fs []*os.File
		for _, p := range files {
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			fs = append(fs, f)
		}
		return fs
	}
	if _, _, err := VerifyFilesWith(open(), nil, key); err != nil {
		t.Fatalf("VerifyFilesWith: %v", err)
	}
	l = openT(t, o)
	if got := l.Progress(digest).Calls(0); got != 5 {
		t.Fatalf("calls = %d, want 5", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	i0 := 0
	ok := true
	forgeAppend(t, l.AuditPath(), record{Time: time.Now().UTC(), Type: typeOutcome, Plan: digest, Step: "a", StepIndex: &i0, Tool: "t", Ref: 1, OK: &ok})
	files = seriesOf(t, l.AuditPath())
	if _, _, err := VerifyFilesWith(open(), nil, key); err == nil || !strings.Contains(err.Error(), "has no state MAC") {
		t.Fatalf("VerifyFilesWith after a forged record: %v", err)
	}
	if l, err := Open(context.Background(), o); err == nil {
		l.Close()
		t.Fatal("Open took the forged record")
	}
}
