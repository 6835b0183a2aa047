package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The attacker of these tests can write the journal (append to it, or
// rewrite what follows the anchored head, recomputing the hash chain: it
// needs no secret) and checkpoint.json, holds no signing key and leaves the
// anchor alone. Each record that would widen what may be forwarded must be
// refused at Open and by Verify, or, for an approval, not be used until it
// was verified again.

// journalTail returns the journal's size, last seq and last hash.
func journalTail(t *testing.T, path string) (int64, uint64, string) {
	t.Helper()
	data := mustRead(t, path)
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	last := lines[len(lines)-1]
	seq, _, ok := chainHeader(last)
	if !ok {
		t.Fatalf("last line of %s has no chain header", path)
	}
	return int64(len(data)), seq, lineHash(last)
}

// forgeAppend appends records, chained as planlock chains them, to the
// journal at path, and returns the start offset, seq and hash of the last.
func forgeAppend(t *testing.T, path string, recs ...record) (int64, uint64, string) {
	t.Helper()
	size, seq, head := journalTail(t, path)
	var out []byte
	var start int64
	for i := range recs {
		body, err := encodeBody(&recs[i])
		if err != nil {
			t.Fatal(err)
		}
		start = size + int64(len(out))
		seq++
		out, head = appendLine(out, seq, head, body)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(out); err != nil {
		t.Fatal(err)
	}
	return start, seq, head
}

// forgedState is a state in which step 0 of digest has had no call.
func forgedState(t *testing.T) []byte {
	t.Helper()
	st := newState()
	p := st.plan(digest)
	p.grow(0)
	p.names[0] = "a"
	b, err := json.Marshal(st.checkpoint())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sha(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// usedUp makes dir's state: step "a" with max_calls 1 used, and a
// pending hold; it returns the hold. Close anchors the end and (with
// checkpoint) takes a checkpoint.
func usedUp(t *testing.T, dir string, checkpoint bool) Hold {
	t.Helper()
	ctx := context.Background()
	l := openT(t, Options{Dir: dir})
	if checkpoint {
		l.closeCheckpointMin = 1
	}
	if _, err := l.Reserve(ctx, Reservation{Call: call("a", 0, "t", ""), MaxCalls: 1}); err != nil {
		t.Fatal(err)
	}
	h, err := l.Hold(ctx, call("a", 0, "t", `{"n":1}`), "approval", time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestAppendedRecordsDoNotWiden: a forged checkpoint or segment record,
// appended after the anchor or inserted before other records, is refused
// at start and by Verify; the count stays used.
func TestAppendedRecordsDoNotWiden(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		forge func(t *testing.T, dir string)
		want  string // in Open's and Verify's error
	}{
		{"checkpoint record appended, with a matching checkpoint.json", func(t *testing.T, dir string) {
			st := forgedState(t)
			path := filepath.Join(dir, auditName)
			start, seq, head := forgeAppend(t, path, record{Time: time.Now().UTC(), Type: typeCheckpoint, StateSHA: sha(st)})
			size, _, _ := journalTail(t, path)
			b, _ := json.Marshal(checkpoint{Version: checkpointVersion, Audit: path, Records: int(seq), Head: head, Offset: size, LastStart: start, State: st})
			if err := os.WriteFile(filepath.Join(dir, checkpointName), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "vouches for a state that the records before it do not give"},
		{"checkpoint record inserted before other records, with a matching checkpoint.json", func(t *testing.T, dir string) {
			st := forgedState(t)
			path := filepath.Join(dir, auditName)
			start, seq, head := forgeAppend(t, path, record{Time: time.Now().UTC(), Type: typeCheckpoint, StateSHA: sha(st)})
			size, _, _ := journalTail(t, path)
			i := 0
			forgeAppend(t, path, record{Time: time.Now().UTC(), Type: typeDecision, Decision: DecisionBlock, Plan: digest, Step: "a", StepIndex: &i, Tool: "t", Reason: "x"})
			b, _ := json.Marshal(checkpoint{Version: checkpointVersion, Audit: path, Records: int(seq), Head: head, Offset: size, LastStart: start, State: st})
			if err := os.WriteFile(filepath.Join(dir, checkpointName), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "vouches for a state that the records before it do not give"},
		{"checkpoint record appended, checkpoint.json left alone", func(t *testing.T, dir string) {
			forgeAppend(t, filepath.Join(dir, auditName), record{Time: time.Now().UTC(), Type: typeCheckpoint, StateSHA: sha(forgedState(t))})
		}, "vouches for a state that the records before it do not give"},
		{"segment record appended", func(t *testing.T, dir string) {
			st := forgedState(t)
			forgeAppend(t, filepath.Join(dir, auditName), record{Time: time.Now().UTC(), Type: typeSegment, StateSHA: sha(st), State: st, PrevSegment: "audit.x.jsonl"})
		}, "a segment record that does not start its file"},
		{"a new file started with a forged segment record continuing the chain", func(t *testing.T, dir string) {
			path := filepath.Join(dir, auditName)
			size, seq, head := journalTail(t, path)
			_ = size
			name := SegmentName(path, 1, seq)
			if err := os.Rename(path, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
			os.Remove(filepath.Join(dir, checkpointName))
			st := forgedState(t)
			body, err := encodeBody(&record{Time: time.Now().UTC(), Type: typeSegment, StateSHA: sha(st), State: st, PrevSegment: name})
			if err != nil {
				t.Fatal(err)
			}
			line, _ := appendLine(nil, seq+1, head, body)
			if err := os.WriteFile(path, line, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "not written by planlock from this journal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			usedUp(t, dir, true)
			tt.forge(t, dir)
			l, err := Open(ctx, Options{Dir: dir})
			if err == nil {
				_, rerr := l.Reserve(ctx, Reservation{Call: call("a", 0, "t", ""), MaxCalls: 1})
				l.Close()
				t.Fatalf("Open accepted the forged record; a second call of max_calls 1: %v", rerr)
			}
			t.Logf("Open: %v", err)
			if !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Open: %v, want %q", err, tt.want)
			}
			files, err := OpenSeries(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer CloseFiles(files)
			if _, _, err := VerifyFiles(files, nil); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("VerifyFiles: %v, want %q", err, tt.want)
			}
		})
	}
}

// TestAppendedApprovalIsNotTrusted: a hold_update record that approves a
// hold, appended by someone without the approver's key, does not let the
// held call run after a restart; nor does an approval read back from a
// checkpoint. An approval the caller verifies again (UpdateHold) does.
func TestAppendedApprovalIsNotTrusted(t *testing.T) {
	ctx := context.Background()
	held := call("a", 0, "t", `{"n":1}`)
	for _, checkpoint := range []bool{false, true} {
		for _, how := range []string{"appended", "inserted before other records", "written by planlock before a restart"} {
			t.Run(how+map[bool]string{false: "", true: ", from a checkpoint"}[checkpoint], func(t *testing.T) {
				dir := t.TempDir()
				h := usedUp(t, dir, checkpoint)
				path := filepath.Join(dir, auditName)
				approve := record{Time: time.Now().UTC(), Type: typeHoldUpdate, Plan: digest, Step: "a", Tool: "t", Hold: h.ID, HoldState: HoldApproved, Note: "approval verified"}
				switch how {
				case "appended":
					forgeAppend(t, path, approve)
				case "inserted before other records":
					i := 0
					forgeAppend(t, path, approve, record{Time: time.Now().UTC(), Type: typeDecision, Decision: DecisionBlock, Plan: digest, Step: "a", StepIndex: &i, Tool: "t", Reason: "x"})
				default:
					l := openT(t, Options{Dir: dir})
					l.closeCheckpointMin = 1
					if _, err := l.UpdateHold(ctx, h.ID, HoldUpdate{State: HoldApproved, Evidence: sha([]byte("bundle"))}); err != nil {
						t.Fatal(err)
					}
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
				}
				if checkpoint && how != "written by planlock before a restart" {
					// Let planlock itself checkpoint the forged approval.
					l := openT(t, Options{Dir: dir})
					l.closeCheckpointMin = 1
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
				}
				l := openT(t, Options{Dir: dir})
				for _, got := range []func() (Hold, bool){
					func() (Hold, bool) { return l.FindHold(held) },
					func() (Hold, bool) { return l.GetHold(h.ID) },
				} {
					if g, ok := got(); !ok || g.State != HoldPending {
						t.Fatalf("hold after restart: %+v %v, want pending until verified again", g, ok)
					}
				}
				rv := Reservation{Call: held, MaxCalls: 1, HoldID: h.ID, OverLimit: true}
				if _, err := l.Reserve(ctx, rv); !errors.Is(err, ErrHoldState) {
					t.Fatalf("consume the approval read back: %v, want ErrHoldState", err)
				}
				if g, _ := l.NewHold(ctx, held, HoldSpec{Reason: "approval", Expires: time.Now().Add(time.Hour)}); g.State != HoldPending {
					t.Fatalf("the same call held again: %s, want pending", g.State)
				}
				// Verified again by the caller (internal/approvals does it
				// against its trust policy): now it counts, once.
				g, err := l.UpdateHold(ctx, h.ID, HoldUpdate{State: HoldApproved, Evidence: sha([]byte("bundle"))})
				if err != nil || g.State != HoldApproved || g.ApprovalSHA256 != sha([]byte("bundle")) {
					t.Fatalf("verified again: %+v %v", g, err)
				}
				if _, err := l.Reserve(ctx, rv); err != nil {
					t.Fatalf("consume the verified approval: %v", err)
				}
				if _, err := l.Reserve(ctx, rv); !errors.Is(err, ErrHoldState) {
					t.Fatalf("consume it twice: %v", err)
				}
			})
		}
	}
}

// TestCheckpointPastTheAnchorIsReplayed: planlock's own checkpoint whose
// anchor write a crash lost (the anchor still at the record before) is not
// used, and the file replayed from its start gives the same counts: its
// record is re-derived, not refused.
func TestCheckpointPastTheAnchorIsReplayed(t *testing.T) {
	dir := t.TempDir()
	reserveN(t, dir, 3) // records 1-3, checkpoint record 4, anchored
	_, seq, _ := journalTail(t, filepath.Join(dir, auditName))
	data := mustRead(t, filepath.Join(dir, auditName))
	lines := bytes.SplitAfter(data, []byte("\n"))
	before := bytes.TrimSuffix(lines[seq-2], []byte("\n"))
	if err := os.Remove(filepath.Join(dir, anchorName)); err != nil {
		t.Fatal(err)
	}
	if err := createAnchor(dir, Head{Seq: seq - 1, Hash: lineHash(before)}); err != nil {
		t.Fatal(err)
	}
	l := openT(t, Options{Dir: dir})
	if got := l.Progress(digest).Calls(0); got != 3 {
		t.Fatalf("calls = %d after replaying past the anchor, want 3", got)
	}
}

// TestSpentHoldIsNotRevived: a hold_update record that moves a consumed or
// rejected hold back to approved or pending is one planlock never writes;
// its signed approval may still verify, so it would let the call run again.
// Start is refused and Verify fails.
func TestSpentHoldIsNotRevived(t *testing.T) {
	ctx := context.Background()
	held := call("a", 0, "t", `{"n":1}`)
	tests := []struct {
		name  string
		spend func(t *testing.T, l *Ledger, h Hold)
		to    HoldState
	}{
		{"consumed, to approved", func(t *testing.T, l *Ledger, h Hold) {
			if _, err := l.UpdateHold(ctx, h.ID, HoldUpdate{State: HoldApproved, Evidence: sha([]byte("bundle"))}); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Reserve(ctx, Reservation{Call: held, MaxCalls: 1, HoldID: h.ID, OverLimit: true}); err != nil {
				t.Fatal(err)
			}
		}, HoldApproved},
		{"consumed, to pending", func(t *testing.T, l *Ledger, h Hold) {
			if _, err := l.UpdateHold(ctx, h.ID, HoldUpdate{State: HoldApproved}); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Reserve(ctx, Reservation{Call: held, MaxCalls: 1, HoldID: h.ID, OverLimit: true}); err != nil {
				t.Fatal(err)
			}
		}, HoldPending},
		{"rejected, to approved", func(t *testing.T, l *Ledger, h Hold) {
			if _, err := l.UpdateHold(ctx, h.ID, HoldUpdate{State: HoldRejected}); err != nil {
				t.Fatal(err)
			}
		}, HoldApproved},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			h := usedUp(t, dir, false)
			l := openT(t, Options{Dir: dir})
			tt.spend(t, l, h)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, auditName)
			forgeAppend(t, path, record{Time: time.Now().UTC(), Type: typeHoldUpdate, Plan: digest, Step: "a", Tool: "t", Hold: h.ID, HoldState: tt.to})
			const want = "which planlock never writes"
			if l, err := Open(ctx, Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), want) {
				if l != nil {
					l.Close()
				}
				t.Fatalf("Open: %v, want %q", err, want)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := Verify(f); err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Verify: %v, want %q", err, want)
			}
		})
	}
}
