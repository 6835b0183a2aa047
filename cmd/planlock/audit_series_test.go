package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
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
	files, err := journalSeries([]string{dir})
	if err != nil || len(files) < 4 || filepath.Base(files[len(files)-1]) != "audit.jsonl" {
		t.Fatalf("journalSeries(%s) = %v, %v", dir, files, err)
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
