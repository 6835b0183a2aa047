package ledger

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

// seriesOf lists a state directory's journal files in chain order:
// archived segments by name, then the journal.
func seriesOf(t testing.TB, audit string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(audit))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if _, _, ok := ParseSegmentName(audit, e.Name()); ok {
			out = append(out, filepath.Join(filepath.Dir(audit), e.Name()))
		}
	}
	slices.Sort(out)
	return append(out, audit)
}

// openFiles opens paths for walkSeries, closed when the test ends.
func openFiles(t testing.TB, paths []string) []*os.File {
	t.Helper()
	files, err := openPaths(paths)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { CloseFiles(files) })
	return files
}

func reserveCalls(t testing.TB, l *Ledger, n, max int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := l.Reserve(context.Background(), Reservation{Call: call("lookup", 0, "get_order", `{"order_id":"4711"}`), MaxCalls: max}); err != nil {
			t.Fatalf("reserve %d: %v", i+1, err)
		}
	}
}

// A journal rotated by size keeps its counts across a restart, with or
// without checkpoint.json and with its archived segments moved away, and
// its files verify as one series.
func TestRotateBySizeKeepsCounts(t *testing.T) {
	dir := t.TempDir()
	o := Options{Dir: dir, RotateSize: 1, SyncEachCall: true}
	l := openT(t, o)
	reserveCalls(t, l, 7, 10)
	if _, err := l.Hold(context.Background(), call("refund", 1, "refund", `{"amount":5}`), "over limit", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l.Stats().Rotations < 2 {
		t.Fatalf("Rotations = %d, want several with RotateSize 1", l.Stats().Rotations)
	}
	files := seriesOf(t, l.AuditPath())
	if len(files) < 3 {
		t.Fatalf("files %v: want archived segments and the journal", files)
	}
	segs, res, err := VerifySeries(files, nil)
	if err != nil {
		t.Fatalf("VerifySeries: %v", err)
	}
	if res.First != 1 || res.Records != int(l.seq) || len(segs) != len(files) {
		t.Fatalf("series %+v (%d files), want seq 1..%d over %d files", res, len(segs), l.seq, len(files))
	}
	// The journal alone starts with a segment record and verifies.
	f, err := os.Open(l.AuditPath())
	if err != nil {
		t.Fatal(err)
	}
	one, err := Verify(f)
	f.Close()
	if err != nil || one.First <= 1 || one.Records != res.Records {
		t.Fatalf("Verify(journal) = %+v, %v; want it to start past seq 1 and end at %d", one, err, res.Records)
	}

	check := func(name string) {
		t.Helper()
		l := openT(t, o)
		if got := l.Progress(digest).Calls(0); got != 7 {
			t.Fatalf("%s: calls = %d, want 7", name, got)
		}
		if len(l.ListHolds()) != 1 {
			t.Fatalf("%s: holds %v, want the one", name, l.ListHolds())
		}
		reserveCalls(t, l, 3, 10)
		_, err := l.Reserve(context.Background(), Reservation{Call: call("lookup", 0, "get_order", `{}`), MaxCalls: 10})
		if !errors.Is(err, ErrExhausted) {
			t.Fatalf("%s: 11th call: %v, want ErrExhausted", name, err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	check("after rotation")
	// Without the cache and without the archived segments the journal's
	// first record carries the state.
	if err := os.Remove(filepath.Join(dir, checkpointName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	archive := t.TempDir()
	for _, p := range seriesOf(t, l.AuditPath()) {
		if p != l.AuditPath() {
			if err := os.Rename(p, filepath.Join(archive, filepath.Base(p))); err != nil {
				t.Fatal(err)
			}
		}
	}
	l3 := openT(t, Options{Dir: dir})
	if got := l3.Progress(digest).Calls(0); got != 10 {
		t.Fatalf("archived and no checkpoint: calls = %d, want 10", got)
	}
	if len(l3.ListHolds()) != 1 {
		t.Fatalf("archived and no checkpoint: holds %v", l3.ListHolds())
	}
	snap, err := Inspect(context.Background(), Options{Dir: dir})
	if err != nil || snap.Progress(digest).Calls(0) != 10 {
		t.Fatalf("Inspect: %v, %+v", err, snap)
	}
}

// Time rotation uses the clock of the records: the journal's file rotates
// once its first record is RotateEvery old.
func TestRotateByTime(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir, Now: clock, RotateEvery: 24 * time.Hour, SyncEachCall: true})
	reserveCalls(t, l, 3, 100)
	if n := l.Stats().Rotations; n != 0 {
		t.Fatalf("rotated %d times within the day", n)
	}
	advance(25 * time.Hour)
	reserveCalls(t, l, 1, 100)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := l.Stats().Rotations; n != 1 {
		t.Fatalf("Rotations = %d after a day, want 1", n)
	}
	// A restart does not reset the day: the new file's first record dates it.
	l2 := openT(t, Options{Dir: dir, Now: clock, RotateEvery: 24 * time.Hour, SyncEachCall: true})
	advance(time.Hour)
	reserveCalls(t, l2, 1, 100)
	if n := l2.Stats().Rotations; n != 0 {
		t.Fatalf("rotated again an hour later (%d)", n)
	}
	advance(24 * time.Hour)
	reserveCalls(t, l2, 1, 100)
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	if n := l2.Stats().Rotations; n != 1 {
		t.Fatalf("Rotations = %d a day after the last, want 1", n)
	}
	if _, res, err := VerifySeries(seriesOf(t, l.AuditPath()), nil); err != nil || res.Records != 6+2 {
		t.Fatalf("series %+v, %v; want 8 records (6 calls, 2 segment records)", res, err)
	}
}

// makeSeries writes a journal rotated into at least five files.
func makeSeries(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir, RotateSize: 1, SyncEachCall: true})
	reserveCalls(t, l, 6, 100)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files := seriesOf(t, l.AuditPath())
	if len(files) < 5 {
		t.Fatalf("only %d files", len(files))
	}
	return files
}

func TestVerifySeriesDetectsTampering(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(t *testing.T, files []string) []string
		bad    int // index of the file named
		want   string
	}{
		{"a middle segment removed", func(t *testing.T, f []string) []string {
			return slices.Delete(slices.Clone(f), 2, 3)
		}, 2, "missing"},
		{"two segments swapped", func(t *testing.T, f []string) []string {
			g := slices.Clone(f)
			g[1], g[2] = g[2], g[1]
			return g
		}, 1, "missing"},
		{"a middle segment edited", func(t *testing.T, f []string) []string {
			b, err := os.ReadFile(f[2])
			if err != nil {
				t.Fatal(err)
			}
			b = bytes.Replace(b, []byte(`"get_order"`), []byte(`"get_0rder"`), 1)
			if err := os.WriteFile(f[2], b, 0o600); err != nil {
				t.Fatal(err)
			}
			return f
		}, 2, "edited"},
		{"a middle segment truncated", func(t *testing.T, f []string) []string {
			b, err := os.ReadFile(f[2])
			if err != nil {
				t.Fatal(err)
			}
			lines := bytes.SplitAfter(b, []byte("\n"))
			cut := bytes.Join(lines[:len(lines)-2], nil) // drop its last record
			if err := os.WriteFile(f[2], cut, 0o600); err != nil {
				t.Fatal(err)
			}
			return f
		}, 3, "missing"},
		{"a middle segment replaced by the first", func(t *testing.T, f []string) []string {
			return []string{f[0], f[1], f[0], f[3]}
		}, 2, "out of order"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := makeSeries(t)
			if _, _, err := VerifySeries(files, nil); err != nil {
				t.Fatalf("before tampering: %v", err)
			}
			got := tt.tamper(t, files)
			_, _, err := VerifySeries(got, nil)
			var se *SeriesError
			if !errors.As(err, &se) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("VerifySeries after tampering: %v, want a *SeriesError", err)
			}
			if se.Index != tt.bad || se.Path != got[tt.bad] || !strings.Contains(se.Error(), tt.want) {
				t.Fatalf("error %q names file %d (%s), want file %d and %q", se, se.Index, se.Path, tt.bad, tt.want)
			}
		})
	}
	t.Run("a later segment alone is a series from its seq", func(t *testing.T) {
		files := makeSeries(t)
		_, res, err := VerifySeries(files[2:], nil)
		if err != nil || res.First <= 1 {
			t.Fatalf("VerifySeries(later files) = %+v, %v", res, err)
		}
	})
}

func TestExportResumes(t *testing.T) {
	files := makeSeries(t)
	var all bytes.Buffer
	res, err := Export(&all, files, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(all.String(), "\n"), "\n")
	if len(lines) != res.Records || res.Last != uint64(res.Records) {
		t.Fatalf("export %+v wrote %d lines", res, len(lines))
	}
	if strings.Contains(all.String(), `"state":`) {
		t.Fatal("export carries the segment records' inline state")
	}
	for _, from := range []uint64{1, 2, 5, uint64(res.Records), uint64(res.Records) + 1} {
		var part bytes.Buffer
		pr, err := Export(&part, files, from, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := ""
		if from <= uint64(len(lines)) {
			want = strings.Join(lines[from-1:], "")
			if !strings.HasSuffix(want, "\n") {
				want += "\n"
			}
		}
		if part.String() != want {
			t.Fatalf("--from-seq %d: got\n%s\nwant\n%s", from, part.String(), want)
		}
		if pr.Head != res.Head {
			t.Fatalf("--from-seq %d: head %s, want %s", from, pr.Head, res.Head)
		}
	}
	// A break stops the export before the record that breaks.
	if err := os.Remove(files[2]); err != nil {
		t.Fatal(err)
	}
	var cut bytes.Buffer
	cr, err := Export(&cut, files, 0, nil)
	if err == nil || cr.Records >= res.Records || !strings.HasPrefix(all.String(), cut.String()) {
		t.Fatalf("export over a missing file: %+v, %v", cr, err)
	}
}

// The export shape is a contract with log stores: a fixed journal exports
// to testdata/export.golden byte for byte.
func TestExportGolden(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir, Now: func() time.Time { return at }, RotateSize: 1, SyncEachCall: true})
	ctx := context.Background()
	if err := l.LoadPlan(ctx, PlanLoad{Name: "refund-4711", Digest: digest, SignedAt: at.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	tk, err := l.Reserve(ctx, Reservation{Call: call("lookup", 0, "get_order", `{"order_id":"4711","note":"<a&b>"}`), MaxCalls: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Complete(ctx, tk, Outcome{OK: true, Latency: 1500 * time.Microsecond}); err != nil {
		t.Fatal(err)
	}
	if err := l.Block(ctx, call("refund", 1, "refund", `{"amount":500}`), "amount 500 > 100"); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := Export(&out, seriesOf(t, l.AuditPath()), 0, nil); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "export.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("export differs from %s (go test -run TestExportGolden -update rewrites it):\n%s", golden, out.Bytes())
	}
}

// A crash at any step of a rotation loses no count: Open finds the journal
// whole (the old file, or the new one), cleans what the rotation left, and
// the files verify as one series.
func TestRotateCrash(t *testing.T) {
	for _, step := range []string{"created", "written", "linked", "renamed"} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			l, err := Open(context.Background(), Options{Dir: dir, RotateSize: 1, SyncEachCall: true})
			if err != nil {
				t.Fatal(err)
			}
			crashed := errors.New("crash")
			l.rotateHook = func(s string) error {
				if s == step {
					return crashed
				}
				return nil
			}
			// Two reservations are acknowledged, then the writer rotates
			// (a file with one record is not rotated) and "crashes" at
			// the step.
			reserveCalls(t, l, 2, 10)
			_, err = l.Reserve(context.Background(), Reservation{Call: call("lookup", 0, "get_order", `{}`), MaxCalls: 10})
			if !errors.Is(err, ErrFailed) {
				t.Fatalf("reserve after the crash: %v, want ErrFailed", err)
			}
			_ = l.Close() // releases the locks; writes nothing after a failure
			if step == "created" {
				if fi, err := os.Stat(l.AuditPath() + nextSuffix); err != nil || fi.Size() != 0 {
					t.Fatalf("the crash did not leave an empty next file: %v", err)
				}
			}

			l2 := openT(t, Options{Dir: dir, RotateSize: 1 << 30})
			if got := l2.Progress(digest).Calls(0); got != 2 {
				t.Fatalf("calls = %d after a crash at %q, want 2", got, step)
			}
			reserveCalls(t, l2, 1, 10)
			if err := l2.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(l.AuditPath() + nextSuffix); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("next file left after Open: %v", err)
			}
			files := seriesOf(t, l.AuditPath())
			if _, res, err := VerifySeries(files, nil); err != nil || res.First != 1 {
				t.Fatalf("series %v after a crash at %q: %+v, %v", files, step, res, err)
			}
			wantFiles := 1
			if step == "renamed" {
				wantFiles = 2
			}
			if len(files) != wantFiles {
				t.Fatalf("files %v after a crash at %q, want %d", files, step, wantFiles)
			}
		})
	}
}

// Steady concurrent traffic, which may never leave the queue empty, still
// rotates by size; every count lands in the series exactly once.
func TestRotateUnderConcurrentLoad(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir, RotateSize: 4096})
	const workers, each = 8, 150
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				tk, err := l.Reserve(context.Background(), Reservation{Call: call("lookup", 0, "get_order", `{}`), MaxCalls: 100000})
				if err != nil {
					t.Error(err)
					return
				}
				if err := l.Complete(context.Background(), tk, Outcome{OK: true}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l.Stats().Rotations < 3 {
		t.Fatalf("Rotations = %d under load, want several", l.Stats().Rotations)
	}
	allows := 0
	if _, _, err := walkSeries(openFiles(t, seriesOf(t, l.AuditPath())), nil, func(p *parsed) error {
		if p.Type == typeDecision && p.Decision == DecisionAllow {
			allows++
		}
		return nil
	}, false); err != nil {
		t.Fatal(err)
	}
	l2 := openT(t, Options{Dir: dir})
	if got := l2.Progress(digest).Calls(0); allows != workers*each || got != allows {
		t.Fatalf("%d allow records, %d calls counted after reopen; want %d allowed", allows, got, workers*each)
	}
}

// Inspect reads the state of a journal that rotates under it (holds list
// beside a running proxy): every read succeeds and counts no less than the
// calls already granted.
func TestInspectWhileRotating(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir, RotateSize: 1, SyncEachCall: true})
	var granted sync.WaitGroup
	var mu sync.Mutex
	n := 0
	stop := make(chan struct{})
	granted.Add(1)
	go func() {
		defer granted.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := l.Reserve(context.Background(), Reservation{Call: call("lookup", 0, "get_order", `{}`), MaxCalls: 1 << 30}); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			n++
			mu.Unlock()
		}
	}()
	for i := 0; l.Stats().Rotations < 5; i++ {
		if i == 100000 {
			break
		}
		mu.Lock()
		before := n
		mu.Unlock()
		snap, err := Inspect(context.Background(), Options{Dir: dir})
		if err != nil {
			close(stop)
			granted.Wait()
			t.Fatalf("Inspect %d while rotating: %v", i, err)
		}
		if got := snap.Progress(digest).Calls(0); got < before {
			t.Errorf("Inspect %d: %d calls, but %d were granted before it", i, got, before)
		}
	}
	close(stop)
	granted.Wait()
	if l.Stats().Rotations < 5 {
		t.Fatalf("no rotation happened during the reads (%d calls, %+v)", n, l.Stats())
	}
}

// Every field a journal record can carry is exported under the same JSON
// name, except a segment record's inline state: a field added to the
// record cannot silently miss the export.
func TestExportRecordCoversRecord(t *testing.T) {
	names := func(typ reflect.Type) map[string]bool {
		out := map[string]bool{}
		for i := 0; i < typ.NumField(); i++ {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			out[name] = true
		}
		return out
	}
	exported := names(reflect.TypeOf(ExportRecord{}))
	for name := range names(reflect.TypeOf(record{})) {
		if name != "state" && !exported[name] {
			t.Errorf("record field %q is not in ExportRecord", name)
		}
	}
	for _, name := range []string{"schema", "seq", "prev", "hash"} {
		if !exported[name] {
			t.Errorf("ExportRecord lacks %q", name)
		}
	}
}

// BenchmarkRotate is a durable reservation that rotates the journal each
// time (RotateSize 1), against the same without rotation: the difference is
// the cost of one rotation (two more fdatasyncs, a link, a rename and three
// directory syncs).
func BenchmarkRotate(b *testing.B) {
	for _, size := range []int64{0, 1} {
		name := "no-rotation"
		if size > 0 {
			name = "rotate-each-call"
		}
		b.Run(name, func(b *testing.B) {
			l := openT(b, Options{Dir: b.TempDir(), RotateSize: size, SyncEachCall: true})
			ctx := context.Background()
			reserveCalls(b, l, 2, math.MaxInt) // a file of one record is not rotated
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := l.Reserve(ctx, Reservation{Call: call("lookup", 0, "get_order", `{}`), MaxCalls: math.MaxInt}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(l.Stats().Rotations)/float64(b.N), "rotations/op")
		})
	}
}

// An anchor older than the first record of the journal's current file, with
// no checkpoint, is what Inspect may read beside a proxy that rotates (the
// anchor first; the file after the rotation's rename, before its new
// checkpoint) and what a restored old anchor looks like. The anchor's
// record is then in an earlier segment: that is what Inspect (which reads
// again) and Open report, never that records were removed from the end.
func TestAnchorInEarlierSegment(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir, SyncEachCall: true})
	for range 2 {
		if _, err := l.Reserve(ctx, Reservation{Call: call("lookup", 0, "get_order", `{}`), MaxCalls: 1 << 30}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	old, err := ReadHead(Options{Dir: dir})
	if err != nil || old.Seq != 2 {
		t.Fatalf("head after two calls: %v %v, want seq 2", old, err)
	}
	l = openT(t, Options{Dir: dir, SyncEachCall: true, RotateSize: 1})
	for l.Stats().Rotations < 2 {
		if _, err := l.Reserve(ctx, Reservation{Call: call("lookup", 0, "get_order", `{}`), MaxCalls: 1 << 30}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := createAnchor(dir, old); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, checkpointName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	_, ierr := Inspect(ctx, Options{Dir: dir})
	_, oerr := Open(ctx, Options{Dir: dir})
	for what, err := range map[string]error{"Inspect": ierr, "Open": oerr} {
		if !errors.Is(err, ErrAnchor) || !errors.Is(err, errEarlierSegment) || errors.Is(err, ErrTruncated) {
			t.Errorf("%s: %v; want the anchor's record 2 in an earlier segment, not a truncation", what, err)
		}
	}
}
