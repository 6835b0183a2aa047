package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A log whose last write was cut by a crash has no final newline, which a
// txtar file cannot hold; this drives the CLI directly.
func TestAuditVerifyTornLastLine(t *testing.T) {
	good, err := os.ReadFile("testdata/script/audit_verify.txtar")
	if err != nil {
		t.Fatal(err)
	}
	// The good log is the first file of the script's archive.
	start := bytes.Index(good, []byte("-- state/audit.jsonl --\n"))
	end := bytes.Index(good, []byte("-- edited.jsonl --"))
	if start < 0 || end < 0 {
		t.Fatal("audit_verify.txtar lost its good log")
	}
	log := good[start+len("-- state/audit.jsonl --\n") : end]
	torn := filepath.Join(t.TempDir(), "torn.jsonl")
	if err := os.WriteFile(torn, log[:len(log)-40], 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args       []string
		wantOut    string
		wantErr    string
		wantStatus int
	}{
		{[]string{"planlock", "audit", "verify", torn}, "",
			"planlock: " + torn + ": line 14: torn: the last line is incomplete (no newline), a write cut short by a crash; opening the state directory truncates it\n", 1},
		{[]string{"planlock", "audit", "verify", "--json", torn},
			"{\n  \"ok\": false,\n  \"records\": 13,\n  \"line\": 14,\n  \"torn\": true,\n  \"reason\": \"torn: the last line is incomplete (no newline), a write cut short by a crash; opening the state directory truncates it\"\n}\n", "", 1},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		code := run(context.Background(), tt.args, streams{in: strings.NewReader(""), out: &out, err: &errb})
		if code != tt.wantStatus || out.String() != tt.wantOut || errb.String() != tt.wantErr {
			t.Errorf("%v: exit %d\nstdout %q\nstderr %q\nwant exit %d\nstdout %q\nstderr %q", tt.args[1:], code, out.String(), errb.String(), tt.wantStatus, tt.wantOut, tt.wantErr)
		}
	}
}
