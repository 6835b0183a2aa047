package ledger

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestTruncatedJournalRefusedAfterRestart: removing the last records of the
// journal (the calls already forwarded) no longer gives them back: the next
// Open refuses, whether a checkpoint is there or not.
func TestTruncatedJournalRefusedAfterRestart(t *testing.T) {
	for _, keepCheckpoint := range []bool{false, true} {
		t.Run(map[bool]string{false: "no checkpoint", true: "checkpoint"}[keepCheckpoint], func(t *testing.T) {
			dir := t.TempDir()
			ctx := context.Background()
			l := openT(t, Options{Dir: dir})
			for range 3 {
				if _, err := l.Reserve(ctx, Reservation{Call: call("refund", 0, "refund", ""), MaxCalls: 3}); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if !keepCheckpoint {
				os.Remove(filepath.Join(dir, checkpointName))
			}
			dropLines(t, dir, 2)
			_, err := Open(ctx, Options{Dir: dir})
			if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), "truncated: the audit log has 1 records but its anchor says 3") {
				t.Fatalf("Open of a truncated journal: %v, want ErrTruncated", err)
			}
		})
	}
}

// TestMissingAnchorAcceptedOnce: with AcceptMissingAnchor a journal without
// anchor opens, and a new anchor is written at its end.
func TestMissingAnchorAcceptedOnce(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	reserveN(t, dir, 3)
	os.Remove(filepath.Join(dir, anchorName))
	if _, err := Open(ctx, Options{Dir: dir}); !errors.Is(err, ErrAnchor) {
		t.Fatalf("Open without anchor: %v, want ErrAnchor", err)
	}
	l, err := Open(ctx, Options{Dir: dir, AcceptMissingAnchor: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Progress(digest).Calls(0); got != 3 {
		t.Fatalf("calls %d, want 3", got)
	}
	l.Close()
	h, err := ReadHead(Options{Dir: dir})
	if err != nil || h.Seq != 4 {
		t.Fatalf("head after accepting: %v %v, want seq 4", h, err)
	}
	// From now on it is anchored again.
	reserveN(t, dir, 1)
	dropLines(t, dir, 1)
	os.Remove(filepath.Join(dir, checkpointName))
	if _, err := Open(ctx, Options{Dir: dir}); !errors.Is(err, ErrTruncated) {
		t.Fatalf("Open: %v, want ErrTruncated", err)
	}
}

// TestAnchorFollowsDurableRecords: the anchor is written only to be
// synced, by the flush timer within FlushInterval of a sync and at Close,
// not by the syncs every call waits for; each time it names the journal's
// durable end.
func TestAnchorFollowsDurableRecords(t *testing.T) {
	ctx := context.Background()
	journalEnd := func(t *testing.T, l *Ledger) Head {
		t.Helper()
		res := verifyPath(t, l.AuditPath())
		return Head{Seq: uint64(res.Records), Hash: res.Head}
	}
	headOf := func(t *testing.T, dir string) Head {
		t.Helper()
		h, err := ReadHead(Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	t.Run("not on the call's path", func(t *testing.T) {
		dir := t.TempDir()
		l, err := Open(ctx, Options{Dir: dir, SyncEachCall: true, FlushInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			tk, err := l.Reserve(ctx, Reservation{Call: call("a", 0, "t", ""), MaxCalls: 5})
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Complete(ctx, tk, Outcome{OK: true}); err != nil {
				t.Fatal(err)
			}
		}
		if st := l.Stats(); st.Syncs < 3 || st.AnchorWrites != 0 {
			t.Fatalf("%d syncs and %d anchor writes for 3 durable calls; want a sync each and no anchor write", st.Syncs, st.AnchorWrites)
		}
		if h := headOf(t, dir); h.Seq != 0 {
			t.Fatalf("anchor %v before the flush, want the one Open found (seq 0)", h)
		}
		end := journalEnd(t, l)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if h := headOf(t, dir); h.Seq < end.Seq {
			t.Fatalf("anchor %v after Close, want at least the journal's end before it, %v", h, end)
		}
	})
	t.Run("within the flush interval", func(t *testing.T) {
		dir := t.TempDir()
		l := openT(t, Options{Dir: dir, SyncEachCall: true, FlushInterval: 20 * time.Millisecond})
		tk, err := l.Reserve(ctx, Reservation{Call: call("a", 0, "t", ""), MaxCalls: 5})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Complete(ctx, tk, Outcome{OK: true}); err != nil {
			t.Fatal(err)
		}
		end := journalEnd(t, l) // the outcome, written: the timer syncs it
		// The anchor's file is written before the sync's counts are.
		for deadline := time.Now().Add(10 * time.Second); headOf(t, dir) != end || l.Stats().AnchorSyncs == 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("anchor %v (%d anchor syncs), want the journal's end %v within the flush interval", headOf(t, dir), l.Stats().AnchorSyncs, end)
			}
		}
		if st := l.Stats(); st.AnchorWrites != st.AnchorSyncs {
			t.Fatalf("%d anchor writes, %d anchor syncs: want each write synced", st.AnchorWrites, st.AnchorSyncs)
		}
	})
}

// TestAnchorSlots: a torn or damaged slot falls back to the other one; the
// newer valid slot wins.
func TestAnchorSlots(t *testing.T) {
	h1 := Head{Seq: 7, Hash: strings.Repeat("a", 64)}
	h2 := Head{Seq: 9, Hash: strings.Repeat("b", 64)}
	torn := append(encodeSlot(h2)[:40:40], bytes.Repeat([]byte{0}, anchorSlot-40)...)
	edited := bytes.Replace(encodeSlot(h2), []byte("seq=9"), []byte("seq=8"), 1)
	tests := []struct {
		name     string
		file     []byte
		want     Head
		wantSlot int // the slot the next write goes to
		wantErr  bool
	}{
		{"both valid, second newer", append(encodeSlot(h1), encodeSlot(h2)...), h2, 0, false},
		{"both valid, first newer", append(encodeSlot(h2), encodeSlot(h1)...), h2, 1, false},
		{"second torn", append(encodeSlot(h1), torn...), h1, 1, false},
		{"first torn", append(torn, encodeSlot(h1)...), h1, 0, false},
		{"edited without its sum", append(encodeSlot(h1), edited...), h1, 1, false},
		{"only one slot", encodeSlot(h1), h1, 1, false},
		{"none valid", append(torn, edited...), Head{}, 0, true},
		{"empty", nil, Head{}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, anchorName), tt.file, 0o600); err != nil {
				t.Fatal(err)
			}
			h, slot, ok, err := readAnchor(dir)
			if tt.wantErr {
				if !errors.Is(err, ErrAnchor) {
					t.Fatalf("readAnchor: %v %v, want ErrAnchor", h, err)
				}
				return
			}
			if err != nil || !ok || h != tt.want || slot != tt.wantSlot {
				t.Fatalf("readAnchor: %v slot %d %v %v, want %v slot %d", h, slot, ok, err, tt.want, tt.wantSlot)
			}
		})
	}
}

// TestVerifyHead: a journal checked against a head kept elsewhere.
func TestVerifyHead(t *testing.T) {
	lines := journal6(t)
	data := bytes.Join(lines, nil)
	res, err := Verify(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	h3 := lineHash(bytes.TrimSuffix(lines[2], []byte("\n")))
	tests := []struct {
		name    string
		head    Head
		wantIs  error
		wantErr string
	}{
		{"the head", Head{Seq: 6, Hash: res.Head}, nil, ""},
		{"an earlier record", Head{Seq: 3, Hash: h3}, nil, ""},
		{"empty journal's head", Head{Seq: 0, Hash: genesis}, nil, ""},
		{"longer than the journal", Head{Seq: 8, Hash: res.Head}, ErrTruncated, "truncated: the audit log has 6 records but its anchor says 8"},
		{"another hash", Head{Seq: 3, Hash: res.Head}, ErrAnchor, "rewritten: record 3 has hash " + h3},
		{"another last hash", Head{Seq: 6, Hash: h3}, ErrAnchor, "rewritten: record 6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := VerifyHead(bytes.NewReader(data), res, tt.head)
			if tt.wantIs == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, tt.wantIs) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("VerifyHead: %v, want %v %q", err, tt.wantIs, tt.wantErr)
			}
		})
	}
	if seq, ok, err := FindHash(bytes.NewReader(data), h3); seq != 3 || !ok || err != nil {
		t.Fatalf("FindHash: %d %v %v, want 3", seq, ok, err)
	}
	if _, ok, err := FindHash(bytes.NewReader(data), genesis); ok || err != nil {
		t.Fatalf("FindHash of an absent hash: %v %v", ok, err)
	}
}

func TestParseHead(t *testing.T) {
	h := Head{Seq: 12, Hash: strings.Repeat("c", 64)}
	tests := []struct {
		name string
		in   string
		want Head
		ok   bool
	}{
		{"audit head output", h.String() + "\n", h, true},
		{"proxy log line", "planlock: audit head " + h.String() + "\n", h, true},
		{"anchor file copy", string(encodeSlot(Head{Seq: 3, Hash: h.Hash})) + string(encodeSlot(h)), h, true},
		{"highest seq wins", "seq=3 hash=" + h.Hash + "\n" + h.String() + "\nseq=5 hash=" + h.Hash, h, true},
		{"bad sum ignored", "seq=99 hash=" + h.Hash + " sum=0000000000000000\n" + h.String(), h, true},
		{"short hash", "seq=3 hash=abc", Head{}, false},
		{"no seq", "hash=" + h.Hash, Head{}, false},
		{"nothing", "", Head{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseHead(strings.NewReader(tt.in))
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("ParseHead: %v %v, want %v ok=%v", got, err, tt.want, tt.ok)
			}
		})
	}
}

// TestOnHeadAtCheckpointAndClose: the head is handed out at each checkpoint
// and at Close, and it is the anchor's.
func TestOnHeadAtCheckpointAndClose(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	var (
		mu    sync.Mutex
		heads []Head
	)
	l := openT(t, Options{Dir: dir, OnHead: func(h Head) { mu.Lock(); heads = append(heads, h); mu.Unlock() }})
	l.mu.Lock()
	l.checkpointEvery = 5
	l.mu.Unlock()
	for range 6 {
		if _, err := l.Reserve(ctx, Reservation{Call: call("a", 0, "t", ""), MaxCalls: 10}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	anchored, err := ReadHead(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(heads) != 2 || heads[0].Seq != 6 || heads[1] != anchored || anchored.Seq != 7 {
		t.Fatalf("heads %v, anchor %v: want a checkpoint record at seq 6 and the close at seq 7", heads, anchored)
	}
}

// TestOpenChecksTheAnchorsRecord: an anchor behind the journal's end (after
// a power loss, or an older copy) must still name the journal's record at
// its seq, whether that record is before the checkpoint, the checkpoint
// record itself, or after it.
func TestOpenChecksTheAnchorsRecord(t *testing.T) {
	dir := t.TempDir()
	reserveN(t, dir, 3) // 1-3 allow, 4 checkpoint
	l := openT(t, Options{Dir: dir})
	for range 2 { // 5-6 allow; no checkpoint at this Close
		if _, err := l.Reserve(context.Background(), Reservation{Call: call("a", 0, "t", ""), MaxCalls: 100}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(mustRead(t, filepath.Join(dir, auditName)), []byte("\n")), []byte("\n"))
	if len(lines) != 6 {
		t.Fatalf("%d records, want 6", len(lines))
	}
	hash := func(seq int) string { return lineHash(lines[seq-1]) }
	tests := []struct {
		name   string
		head   Head
		wantOK bool
	}{
		{"before the checkpoint", Head{Seq: 2, Hash: hash(2)}, true},
		{"before the checkpoint, another hash", Head{Seq: 2, Hash: hash(3)}, false},
		{"the checkpoint record", Head{Seq: 4, Hash: hash(4)}, true},
		{"the checkpoint record, another hash", Head{Seq: 4, Hash: hash(2)}, false},
		{"after the checkpoint", Head{Seq: 5, Hash: hash(5)}, true},
		{"after the checkpoint, another hash", Head{Seq: 5, Hash: hash(6)}, false},
		{"the end", Head{Seq: 6, Hash: hash(6)}, true},
		{"empty journal's head", Head{Seq: 0, Hash: genesis}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := createAnchor(dir, tt.head); err != nil {
				t.Fatal(err)
			}
			l, err := Open(context.Background(), Options{Dir: dir})
			if tt.wantOK {
				if err != nil {
					t.Fatal(err)
				}
				l.Close()
				return
			}
			if !errors.Is(err, ErrAnchor) || errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), "rewritten: record") {
				t.Fatalf("Open: %v, want a rewritten record", err)
			}
		})
	}
}

// TestTornTruncationNotCut: a journal cut in the middle of an anchored record
// is refused and left as it is (only a torn line past the anchor is a crash's).
func TestTornTruncationNotCut(t *testing.T) {
	dir := t.TempDir()
	reserveN(t, dir, 3)
	os.Remove(filepath.Join(dir, checkpointName))
	path := filepath.Join(dir, auditName)
	data := mustRead(t, path)
	cut := data[:len(data)-30] // inside the last record, which the anchor names
	if err := os.WriteFile(path, cut, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), Options{Dir: dir}); !errors.Is(err, ErrTruncated) {
		t.Fatalf("Open: %v, want ErrTruncated", err)
	}
	if got := mustRead(t, path); !bytes.Equal(got, cut) {
		t.Fatalf("the journal was changed: %d bytes, was %d", len(got), len(cut))
	}
}
