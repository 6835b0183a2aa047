package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planlock/planlock/proxy/ledger"
)

// rotatedState writes a state directory whose journal was rotated into
// several files, by the ledger itself.
func rotatedState(t *testing.T) (dir string, records int) {
	t.Helper()
	dir = t.TempDir()
	l, err := ledger.Open(context.Background(), ledger.Options{Dir: dir, RotateSize: 1, SyncEachCall: true})
	if err != nil {
		t.Fatal(err)
	}
	c := ledger.Call{PlanDigest: "sha256:" + strings.Repeat("1", 64), Step: "lookup", Tool: "get_order", Args: json.RawMessage(`{"id":1}`)}
	for range 5 {
		if _, err := l.Reserve(context.Background(), ledger.Reservation{Call: c, MaxCalls: 100}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := ledger.ReadHead(ledger.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return dir, int(h.Seq)
}

func runAudit(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(context.Background(), append([]string{"planlock"}, args...), streams{in: strings.NewReader(""), out: &out, err: &errb})
	return code, out.String(), errb.String()
}

func TestAuditVerifyAndExportSeries(t *testing.T) {
	dir, records := rotatedState(t)
	opened, err := openSeries([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range opened {
		files = append(files, f.Name())
	}
	ledger.CloseFiles(opened)
	if len(files) < 4 || filepath.Base(files[len(files)-1]) != "audit.jsonl" {
		t.Fatalf("openSeries(%s) = %v", dir, files)
	}

	code, out, errs := runAudit("audit", "verify", "--anchor", filepath.Join(dir, "head"), dir)
	if code != 0 || !strings.Contains(out, "ok: "+plural(records, "record", "records")+" in "+plural(len(files), "file", "files")) || !strings.Contains(out, "anchor: record") {
		t.Fatalf("verify DIR: exit %d\n%s%s", code, out, errs)
	}
	// The files given one by one, in order, are the same series; out of
	// order they are not.
	if code, out, errs := runAudit(append([]string{"audit", "verify"}, files...)...); code != 0 {
		t.Fatalf("verify FILES: exit %d\n%s%s", code, out, errs)
	}
	swapped := append([]string{"audit", "verify"}, files...)
	swapped[3], swapped[4] = swapped[4], swapped[3]
	if code, _, errs := runAudit(swapped...); code != 1 || !strings.Contains(errs, files[2]) {
		t.Fatalf("verify swapped files: exit %d, %s", code, errs)
	}

	// Export: every record, then a resumption.
	code, all, errs := runAudit("audit", "export", dir)
	lines := strings.SplitAfter(strings.TrimSuffix(all, "\n"), "\n")
	if code != 0 || len(lines) != records {
		t.Fatalf("export: exit %d, %d lines, want %d\n%s", code, len(lines), records, errs)
	}
	var first struct {
		Schema string `json:"schema"`
		Seq    uint64 `json:"seq"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first.Schema != ledger.ExportSchema || first.Seq != 1 {
		t.Fatalf("first exported line %s: %+v, %v", lines[0], first, err)
	}
	code, rest, _ := runAudit("audit", "export", "--from-seq", "4", dir)
	if code != 0 || rest != strings.Join(lines[3:], "")+"\n" {
		t.Fatalf("export --from-seq 4: exit %d\n%s", code, rest)
	}

	// A middle segment removed: verify names where the chain breaks, and
	// export stops there.
	if err := os.Remove(files[1]); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runAudit("audit", "verify", "--json", dir)
	var res auditVerifyJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 1 || res.OK || res.File != files[2] || !strings.Contains(res.Reason, "missing") {
		t.Fatalf("verify --json after removing %s: exit %d %+v %v", files[1], code, res, err)
	}
	code, cut, errs := runAudit("audit", "export", dir)
	if code != 1 || !strings.HasPrefix(all, cut) || cut == all || !strings.Contains(errs, files[2]) {
		t.Fatalf("export over a missing segment: exit %d\n%s", code, errs)
	}
}

func TestAuditRotationFlags(t *testing.T) {
	tests := []struct {
		size    string
		every   time.Duration
		want    int64
		wantErr string
	}{
		{"", 0, 0, ""},
		{"64MiB", 24 * time.Hour, 64 << 20, ""},
		{"1GB", 0, 1e9, ""},
		{"65536", 0, 65536, ""},
		{"100 KiB", 0, 100 << 10, ""},
		{"1KiB", 0, 0, "at least 64KiB"},
		{"64mb", 0, 0, "is not a size"},
		{"-5MiB", 0, 0, "is not a size"},
		{"", time.Second, 0, "at least 1m"},
	}
	for _, tt := range tests {
		var o ledger.Options
		err := (&auditRotateOptions{AuditRotateSize: tt.size, AuditRotateEvery: tt.every}).apply(&o)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q %v: error %v, want %q", tt.size, tt.every, err, tt.wantErr)
			}
			continue
		}
		if err != nil || o.RotateSize != tt.want || o.RotateEvery != tt.every {
			t.Errorf("%q %v: %+v, %v", tt.size, tt.every, o, err)
		}
	}
}

// TestAuditBesideRotatingProxy runs audit verify and audit export, as an
// operator would, while a ledger keeps writing and rotating its journal:
// every run must pass and export an unbroken chain, whatever moment of a
// rotation (link, rename) or of a record's write the listing and the reads
// fall on.
func TestAuditBesideRotatingProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for seconds")
	}
	tests := []struct {
		name string
		opts ledger.Options
		pace time.Duration // between two records
	}{
		{"every record, synced", ledger.Options{RotateSize: 1, SyncEachCall: true}, 0},
		// A rotation every few tens of records, and records written as
		// batches while the reads run.
		{"8KiB, batched", ledger.Options{RotateSize: 8 << 10}, 100 * time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.opts.Dir = dir
			l, err := ledger.Open(context.Background(), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			wrote := make(chan error, 1)
			stopped := sync.OnceValue(func() error { close(stop); return <-wrote })
			t.Cleanup(func() { _ = stopped() }) // also when the test fails
			go func() {
				c := ledger.Call{PlanDigest: "sha256:" + strings.Repeat("1", 64), Step: "lookup", Tool: "get_order", Args: json.RawMessage(`{"id":1}`)}
				for {
					select {
					case <-stop:
						wrote <- l.Close()
						return
					default:
					}
					if _, err := l.Reserve(context.Background(), ledger.Reservation{Call: c, MaxCalls: 1 << 30}); err != nil {
						wrote <- err
						return
					}
					time.Sleep(tt.pace)
				}
			}()
			journal := filepath.Join(dir, "audit.jsonl")
			runs := 0
			for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); runs++ {
				if code, out, errs := runAudit("audit", "verify", dir); code != 0 {
					t.Fatalf("run %d: verify DIR beside a rotating ledger: exit %d\n%s%s", runs, code, out, errs)
				}
				if code, out, errs := runAudit("audit", "verify", "--anchor", filepath.Join(dir, "head"), dir); code != 0 {
					t.Fatalf("run %d: verify --anchor DIR beside a rotating ledger: exit %d\n%s%s", runs, code, out, errs)
				}
				if code, out, errs := runAudit("audit", "verify", journal); code != 0 {
					t.Fatalf("run %d: verify the live journal: exit %d\n%s%s", runs, code, out, errs)
				}
				code, out, errs := runAudit("audit", "export", dir)
				if code != 0 {
					t.Fatalf("run %d: export DIR beside a rotating ledger: exit %d\n%s", runs, code, errs)
				}
				checkExportChain(t, out)
			}
			if err := stopped(); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d runs of verify and export", runs)
			// Still the same series once the ledger is closed.
			if code, out, errs := runAudit("audit", "verify", dir); code != 0 {
				t.Fatalf("verify DIR after close: exit %d\n%s%s", code, out, errs)
			}
		})
	}
}

// checkExportChain checks that exported lines are seq 1, 2, 3, ... each
// continuing the one before.
func checkExportChain(t *testing.T, out string) {
	t.Helper()
	var prev ledger.ExportRecord
	for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var e ledger.ExportRecord
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("export line %d: %v", i+1, err)
		}
		if e.Seq != uint64(i+1) || (i > 0 && e.Prev != prev.Hash) {
			t.Fatalf("export line %d: seq %d prev %.12s, after seq %d hash %.12s", i+1, e.Seq, e.Prev, prev.Seq, prev.Hash)
		}
		prev = e
	}
}

// Archived segments moved to a directory of their own (retention) verify
// and export as one series, the journal left behind.
func TestAuditArchivedSegmentsOnly(t *testing.T) {
	dir, _ := rotatedState(t)
	archive := t.TempDir()
	names, err := filepath.Glob(filepath.Join(dir, "audit.*-*.jsonl"))
	if err != nil || len(names) < 2 {
		t.Fatalf("segments %v, %v: want several", names, err)
	}
	for _, n := range names {
		if err := os.Rename(n, filepath.Join(archive, filepath.Base(n))); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errs := runAudit("audit", "verify", archive)
	if code != 0 || !strings.Contains(out, "in "+plural(len(names), "file", "files")) {
		t.Fatalf("verify of %d archived segments: exit %d\n%s%s", len(names), code, out, errs)
	}
	code, out, errs = runAudit("audit", "export", archive)
	if code != 0 {
		t.Fatalf("export of the archived segments: exit %d\n%s", code, errs)
	}
	checkExportChain(t, out)
}
