package ledger

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The crash-state explorer. A workload runs against a real state directory
// with every file-system operation of the ledger traced (fsops.go), and the
// calls it was told were durable marked in the same trace. From the trace it
// builds the states a power loss could leave under the POSIX persistence
// model, in the spirit of ALICE (Pillai et al., OSDI 2014):
//
//   - an operation is persisted for sure once an fsync covers it: a write or
//     truncation by a later sync of its file, a directory entry (mkdir,
//     create, rename, link, unlink) by a later sync of its directory;
//   - of the operations not covered yet, any prefix (in issue order) may
//     have reached the disk;
//   - the last write of such a prefix may be torn at a 512-byte boundary
//     (the sectors after it never written) or zero-filled (the file grew,
//     those sectors read as zeros);
//   - any one directory operation not covered yet may be lost while every
//     other operation reached the disk.
//
// Each state is built in the workload's directory (its paths are in the
// binding and the checkpoint) and opened. The state must either refuse to
// start for a reason that accuses no one (a power loss is not tampering),
// or start with every step's count at least the calls acknowledged before
// the crash, verify as one chain with its archived segments, and grant no
// call past max_calls.
//
// TestCrashStates checks a fixed sample in every test run;
// PLANLOCK_CRASHSTATES=full (scripts/crashstates) checks every state.

// recorder collects a trace; the ledger's goroutines call add.
type recorder struct {
	mu  sync.Mutex
	ops []fsOp
}

func (r *recorder) add(o fsOp) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, o)
}

func (r *recorder) trace() tracer { return r.add }

func (r *recorder) mark(note string) { r.add(fsOp{kind: opMark, note: note}) }

// Two steps: one counted call by call, one in leases.
const (
	csDigest   = "sha256:crashstate"
	csSmallMax = 4
	csLeaseMax = 400
)

func csCall(step int) Reservation {
	name := []string{"small", "leased"}[step]
	max := []int{csSmallMax, csLeaseMax}[step]
	return Reservation{Call: Call{PlanDigest: csDigest, Step: name, StepIndex: step, Tool: "t", Args: []byte(`{"n":1}`)}, MaxCalls: max}
}

func csOptions(dir string, tr tracer) Options {
	// No flush timer: the workload runs its turns at fixed points
	// (writerTurn), so the trace is much the same at every run.
	return Options{Dir: dir, FlushInterval: time.Hour, RotateSize: 2500, trace: tr}
}

// csWorkload runs sessions on root/state, traced, and returns the trace:
// two short ones, and at scale n > 1 n more, n times as long.
func csWorkload(t testing.TB, root string, scale int) []fsOp {
	t.Helper()
	ctx := context.Background()
	rec := &recorder{}
	dir := filepath.Join(root, "state")
	session := func(smalls, leased int, load bool) {
		l, err := Open(ctx, csOptions(dir, rec.trace()))
		if err != nil {
			t.Fatal(err)
		}
		l.mu.Lock()
		l.checkpointEvery = 7 // checkpoints in a short run
		l.mu.Unlock()
		if load {
			if err := l.LoadPlan(ctx, PlanLoad{Name: "cs", Digest: csDigest, SignedAt: time.Unix(1e9, 0)}); err != nil {
				t.Fatal(err)
			}
		}
		reserve := func(step int) {
			tk, err := l.Reserve(ctx, csCall(step))
			if err != nil {
				t.Fatal(err)
			}
			rec.mark("ack " + strconv.Itoa(step))
			if err := l.Complete(ctx, tk, Outcome{OK: true}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range max(smalls, leased) {
			if i < leased {
				reserve(1)
			}
			if i < smalls {
				reserve(0)
			}
			if i%3 == 2 {
				if err := l.Block(ctx, csCall(1).Call, "blocked"); err != nil {
					t.Fatal(err)
				}
				// The flush timer's turn, now: it syncs what is
				// unsynced, anchors it, and rotates when due.
				l.writerTurn(true)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	session(2, 9, true)
	session(1, 6, false)
	for i := 1; i < scale; i++ {
		session(0, 9*scale, false)
	}
	return rec.ops
}

// csOp is a traced operation resolved against the names of its time.
type csOp struct {
	fsOp
	ino   int    // the file written, synced, created, renamed or linked
	dir   string // a directory operation's directory
	cover int    // index of the first later sync that covers it (len: none)
}

func (o csOp) isDirOp() bool {
	switch o.kind {
	case opMkdir, opCreate, opRename, opLink, opRemove:
		return true
	}
	return false
}

func (o csOp) isDataOp() bool { return o.kind == opWrite || o.kind == opTruncate }

// resolve gives each operation its inode and the sync that covers it.
func resolve(t testing.TB, ops []fsOp) []csOp {
	names := map[string]int{}
	next := 1
	out := make([]csOp, len(ops))
	for i, o := range ops {
		c := csOp{fsOp: o, cover: len(ops)}
		switch o.kind {
		case opMkdir, opCreate:
			c.ino, next = next, next+1
			names[o.path] = c.ino
			c.dir = filepath.Dir(o.path)
		case opRename, opLink:
			if filepath.Dir(o.path) != filepath.Dir(o.path2) {
				t.Fatalf("op %d: %v across directories: the model does not cover it", i, o)
			}
			c.ino, c.dir = names[o.path], filepath.Dir(o.path2)
			names[o.path2] = c.ino
			if o.kind == opRename {
				delete(names, o.path)
			}
		case opRemove:
			c.ino, c.dir = names[o.path], filepath.Dir(o.path)
			delete(names, o.path)
		case opWrite, opTruncate, opSync:
			c.ino = names[o.path]
			if c.ino == 0 {
				t.Fatalf("op %d: %v on a file the trace never created", i, o.path)
			}
		}
		out[i] = c
	}
	for i := range out {
		for k := i + 1; k < len(out); k++ {
			s := out[k]
			if out[i].isDataOp() && s.kind == opSync && s.ino == out[i].ino ||
				out[i].isDirOp() && s.kind == opSyncDir && s.path == out[i].dir {
				out[i].cover = k
				break
			}
		}
	}
	return out
}

// csState is one state a power loss could leave: the operations before
// crash that persisted, the last of them maybe torn.
type csState struct {
	crash   int
	persist []bool
	tear    int  // index of a torn write (-1: none)
	keep    int  // bytes of it that reached the disk
	zero    bool // the rest of it reads as zeros
	what    string
}

// enumerate calls fn with every state of the model.
func enumerate(ops []csOp, fn func(csState)) {
	for crash := 0; crash <= len(ops); crash++ {
		base := make([]bool, crash)
		var unsynced []int
		for j := 0; j < crash; j++ {
			switch {
			case !ops[j].isDirOp() && !ops[j].isDataOp():
			case ops[j].cover < crash:
				base[j] = true
			default:
				unsynced = append(unsynced, j)
			}
		}
		for n := 0; n <= len(unsynced); n++ {
			p := slices.Clone(base)
			for _, j := range unsynced[:n] {
				p[j] = true
			}
			fn(csState{crash: crash, persist: p, tear: -1, what: fmt.Sprintf("prefix %d of %d unsynced", n, len(unsynced))})
			if n == 0 || ops[unsynced[n-1]].kind != opWrite {
				continue
			}
			w := ops[unsynced[n-1]]
			for b := (w.off/anchorSlot + 1) * anchorSlot; b < w.off+int64(len(w.data)); b += anchorSlot {
				for _, zero := range []bool{false, true} {
					fn(csState{crash: crash, persist: p, tear: unsynced[n-1], keep: int(b - w.off), zero: zero,
						what: fmt.Sprintf("prefix %d of %d unsynced, last write torn at %d (zero-filled: %t)", n, len(unsynced), b, zero)})
				}
			}
		}
		for _, u := range unsynced {
			if !ops[u].isDirOp() {
				continue
			}
			p := slices.Clone(base)
			for _, j := range unsynced {
				p[j] = j != u
			}
			fn(csState{crash: crash, persist: p, tear: -1, what: fmt.Sprintf("all unsynced but the lost %s of %s", opName(ops[u].kind), filepath.Base(ops[u].path2+ops[u].path))})
		}
	}
}

func opName(k opKind) string {
	return map[opKind]string{opMkdir: "mkdir", opCreate: "create", opRename: "rename", opLink: "link", opRemove: "unlink"}[k]
}

// build computes the files and directories of a state, by path.
// links names each file's inode: names with the same one are hard links.
func build(ops []csOp, s csState) (dirs []string, files map[string][]byte, links map[string]int) {
	names := map[string]int{}
	isDir := map[int]bool{}
	data := map[int][]byte{}
	for j := 0; j < s.crash; j++ {
		if !s.persist[j] {
			continue
		}
		o := ops[j]
		switch o.kind {
		case opMkdir:
			names[o.path], isDir[o.ino] = o.ino, true
		case opCreate:
			names[o.path] = o.ino
			data[o.ino] = nil
		case opRename:
			names[o.path2] = o.ino
			if names[o.path] == o.ino {
				delete(names, o.path)
			}
		case opLink:
			names[o.path2] = o.ino
		case opRemove:
			if names[o.path] == o.ino {
				delete(names, o.path)
			}
		case opTruncate:
			d := data[o.ino]
			if int64(len(d)) > o.off {
				d = d[:o.off]
			} else {
				d = append(d, make([]byte, int(o.off)-len(d))...)
			}
			data[o.ino] = d
		case opWrite:
			src := o.data
			end := o.off + int64(len(src))
			if j == s.tear {
				if !s.zero {
					end = o.off + int64(s.keep)
				}
				src = append(slices.Clone(src[:s.keep]), make([]byte, len(src)-s.keep)...)[:end-o.off]
			}
			d := data[o.ino]
			if int64(len(d)) < end {
				d = append(d, make([]byte, int(end)-len(d))...)
			}
			copy(d[o.off:], src)
			data[o.ino] = d
		}
	}
	files, links = map[string][]byte{}, map[string]int{}
	exists := func(p string) bool { _, ok := names[p]; return ok }
	for p, ino := range names {
		ok := true
		for d := filepath.Dir(p); d != filepath.Dir(d) && ok; d = filepath.Dir(d) {
			if _, traced := names[d]; traced || dirTraced(ops, d) {
				ok = exists(d)
			}
		}
		if !ok {
			continue // its directory did not survive
		}
		if isDir[ino] {
			dirs = append(dirs, p)
		} else {
			files[p] = data[ino]
			links[p] = ino
		}
	}
	slices.Sort(dirs)
	return dirs, files, links
}

// dirTraced reports whether the trace made directory d (else it existed
// before the workload and survives).
func dirTraced(ops []csOp, d string) bool {
	for _, o := range ops {
		if o.kind == opMkdir && o.path == d {
			return true
		}
	}
	return false
}

func stateKey(dirs []string, files map[string][]byte, links map[string]int, ack [2]int) [32]byte {
	h := sha256.New()
	fmt.Fprintf(h, "acked %v\n", ack)
	for _, d := range dirs {
		fmt.Fprintf(h, "d %s\n", d)
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		fmt.Fprintf(h, "f %s %d %d\n", p, links[p], len(files[p]))
		h.Write(files[p])
	}
	var k [32]byte
	copy(k[:], h.Sum(nil))
	return k
}

// acked counts the calls per step acknowledged before crash.
func acked(ops []csOp, crash int) [2]int {
	var n [2]int
	for _, o := range ops[:crash] {
		if o.kind == opMark && strings.HasPrefix(o.note, "ack ") {
			step, _ := strconv.Atoi(strings.TrimPrefix(o.note, "ack "))
			n[step]++
		}
	}
	return n
}

// materialize lays a state out under root (whose state directory is
// removed first).
func materialize(root string, dirs []string, files map[string][]byte, links map[string]int) error {
	if err := os.RemoveAll(filepath.Join(root, "state")); err != nil {
		return err
	}
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	made := map[int]string{}
	for _, p := range paths {
		if first, ok := made[links[p]]; ok {
			if err := os.Link(first, p); err != nil {
				return err
			}
			continue
		}
		if err := os.WriteFile(p, files[p], 0o600); err != nil {
			return err
		}
		made[links[p]] = p
	}
	return nil
}

// csFigures are what an exploration found.
type csFigures struct {
	ops, built, distinct, checked, started, refused, violations int
	refusals                                                    map[string]int
	first                                                       []string
}

// checkState opens a materialized state and returns "" or a violation.
// refused is the reason when it refused to start for one that accuses no
// one.
func checkState(root string, want [2]int) (refused, violation string) {
	ctx := context.Background()
	dir := filepath.Join(root, "state")
	l, err := Open(ctx, Options{Dir: dir, FlushInterval: time.Hour, RotateSize: 2500})
	if err != nil {
		msg := strings.ReplaceAll(err.Error(), root, "ROOT")
		switch {
		case errors.Is(err, ErrAnchor), errors.Is(err, ErrTruncated), errors.Is(err, ErrCorrupt),
			errors.Is(err, ErrCheckpoint), errors.Is(err, ErrBinding):
			// A power loss is not tampering: no state it leaves may be
			// called one.
			return "", "refused as tampered: " + msg
		}
		return msg, ""
	}
	defer l.Close()
	pr := l.Progress(csDigest)
	for step := range 2 {
		if got := pr.Calls(step); got < want[step] {
			return "", fmt.Sprintf("step %d starts at %d calls, but %d were acknowledged durable before the crash", step, got, want[step])
		}
	}
	granted := 0
	for {
		_, err := l.Reserve(ctx, csCall(0))
		if errors.Is(err, ErrExhausted) {
			break
		}
		if err != nil {
			return "", "reserve after the restart: " + err.Error()
		}
		granted++
		if want[0]+granted > csSmallMax {
			return "", fmt.Sprintf("%d calls acknowledged before the crash and %d granted after it: past max_calls %d", want[0], granted, csSmallMax)
		}
	}
	if err := l.Close(); err != nil {
		return "", "close: " + err.Error()
	}
	files, err := OpenSeries(dir)
	if err != nil {
		return "", "audit verify: " + err.Error()
	}
	defer CloseFiles(files)
	_, res, err := VerifyFiles(files, nil)
	if err != nil {
		return "", "audit verify: " + strings.ReplaceAll(err.Error(), root, "ROOT")
	}
	h, err := ReadHead(Options{Dir: dir})
	if err != nil || h.Seq != uint64(res.Records) || h.Hash != res.Head {
		return "", fmt.Sprintf("audit verify --anchor: anchor %v (%v), chain ends at %d %s", h, err, res.Records, res.Head)
	}
	return "", ""
}

// explore runs the workload in root and checks the states: all of them
// (sample 0) or a sample of that many distinct ones, chosen with a fixed
// seed; scale is csWorkload's.
func explore(t testing.TB, root string, scale, sample int) csFigures {
	raw := csWorkload(t, root, scale)
	ops := resolve(t, raw)
	type built struct {
		st    csState
		dirs  []string
		files map[string][]byte
		links map[string]int
	}
	var fig csFigures
	fig.ops = len(ops)
	fig.refusals = map[string]int{}
	seen := map[[32]byte]bool{}
	var states []built
	enumerate(ops, func(s csState) {
		fig.built++
		dirs, files, links := build(ops, s)
		// The same files with more calls acknowledged is another check.
		k := stateKey(dirs, files, links, acked(ops, s.crash))
		if seen[k] {
			return
		}
		seen[k] = true
		states = append(states, built{s, dirs, files, links})
	})
	fig.distinct = len(states)
	if sample > 0 && sample < len(states) {
		r := rand.New(rand.NewPCG(32, 1))
		r.Shuffle(len(states), func(i, j int) { states[i], states[j] = states[j], states[i] })
		states = states[:sample]
	}
	for _, b := range states {
		if err := materialize(root, b.dirs, b.files, b.links); err != nil {
			t.Fatal(err)
		}
		refused, bad := checkState(root, acked(ops, b.st.crash))
		fig.checked++
		switch {
		case bad != "":
			fig.violations++
			if len(fig.first) < 5 {
				fig.first = append(fig.first, fmt.Sprintf("crash after op %d (%s): %s", b.st.crash, b.st.what, bad))
			}
		case refused != "":
			fig.refused++
			fig.refusals[refused]++
		default:
			fig.started++
		}
	}
	return fig
}

// csRoot is a directory for the states: on tmpfs when there is one, where
// the thousands of fsyncs of the checks cost nothing.
func csRoot(t testing.TB) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "planlock-crashstates-")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

func TestCrashStates(t *testing.T) {
	scale, sample := 1, 150
	if os.Getenv("PLANLOCK_CRASHSTATES") == "full" {
		scale, sample = 4, 0
	}
	fig := explore(t, csRoot(t), scale, sample)
	t.Logf("CRASHSTATES ops traced %d, states built %d, distinct %d, checked %d, started %d, refused %d, violations %d",
		fig.ops, fig.built, fig.distinct, fig.checked, fig.started, fig.refused, fig.violations)
	for why, n := range fig.refusals {
		t.Logf("CRASHSTATES refused %d× : %s", n, why)
	}
	if fig.checked == 0 || fig.started == 0 {
		t.Fatalf("nothing checked: %+v", fig)
	}
	if fig.violations > 0 {
		t.Fatalf("%d violations, the first:\n%s", fig.violations, strings.Join(fig.first, "\n"))
	}
}
