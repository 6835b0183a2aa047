package ledger

import (
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// journalSeqs returns the seqs of the records a journal write carries.
var seqField = regexp.MustCompile(`(?m)^\{"seq":(\d+),`)

func seqsOf(data []byte) []uint64 {
	var out []uint64
	for _, m := range seqField.FindAllSubmatch(data, -1) {
		n, _ := strconv.ParseUint(string(m[1]), 10, 64)
		out = append(out, n)
	}
	return out
}

var anchorSeq = regexp.MustCompile(`^planlock-head seq=(\d+) `)

// TestRotationArchivesAndAnchorsOnlyDurableRecords: whatever was queued
// when a rotation ran, the anchor never names a record that no sync of its
// file covered yet, and the old file is archived only once every write to
// it is covered by a sync.
func TestRotationArchivesAndAnchorsOnlyDurableRecords(t *testing.T) {
	ops := resolve(t, csWorkload(t, t.TempDir(), 2))
	rotations := 0
	// covered reports whether op j is covered by a sync before k.
	covered := func(j, k int) bool { return ops[j].cover < k }
	writeOf := map[uint64]int{} // seq → index of the journal write that holds it
	for k, o := range ops {
		switch {
		case o.kind == opWrite && filepath.Base(o.path) != anchorName:
			for _, s := range seqsOf(o.data) {
				writeOf[s] = k
			}
		case o.kind == opWrite:
			m := anchorSeq.FindSubmatch(o.data)
			if m == nil {
				t.Fatalf("op %d: anchor write %q", k, o.data[:40])
			}
			s, _ := strconv.ParseUint(string(m[1]), 10, 64)
			if j, ok := writeOf[s]; ok && !covered(j, k) {
				t.Errorf("op %d: the anchor names seq %d, whose write (op %d) no sync covered yet", k, s, j)
			}
		case o.kind == opLink:
			rotations++
			for j := range k {
				if ops[j].kind == opWrite && ops[j].ino == o.ino && !covered(j, k) {
					t.Errorf("op %d: %s archived as %s with its write op %d (seqs %v) not synced",
						k, filepath.Base(o.path), filepath.Base(o.path2), j, seqsOf(ops[j].data))
				}
			}
		}
	}
	if rotations < 2 {
		t.Fatalf("the workload rotated %d times; the test needs rotations to look at", rotations)
	}
}

// TestNewDirectoriesAreDurable: Open makes the state directory and the
// audit log's directory (and their missing parents), and each new entry is
// synced in its directory before Open returns.
func TestNewDirectoriesAreDurable(t *testing.T) {
	root := t.TempDir()
	rec := &recorder{}
	dir := filepath.Join(root, "x", "state")
	audit := filepath.Join(root, "logs", "a", "audit.jsonl")
	l, err := Open(context.Background(), Options{Dir: dir, AuditPath: audit, FlushInterval: time.Hour, trace: rec.trace()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ops := resolve(t, rec.ops)
	want := map[string]bool{filepath.Join(root, "x"): false, dir: false, filepath.Join(root, "logs"): false,
		filepath.Join(root, "logs", "a"): false, audit: false}
	for _, o := range ops {
		if _, ok := want[o.path]; ok && (o.kind == opMkdir || o.kind == opCreate) {
			want[o.path] = true
			if o.cover == len(ops) {
				t.Errorf("%s was made but its directory %s was never synced", o.path, o.dir)
			}
		}
	}
	for p, made := range want {
		if !made {
			t.Errorf("the trace has no creation of %s", p)
		}
	}
}
