package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSignCheckExpiry(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		expires  string // "" = no expires line
		wantErr  string
		wantWarn string
	}{
		{"no expiry", "", "", ""},
		{"far", "2027-12-01T00:00:00Z", "", ""},
		{"in two days", "2026-12-03T12:00:00Z", "", ""},
		{"within a day", "2026-12-02T02:00:00Z", "", `planlock: warning: plan.hcl: plan "p" expires at 2026-12-02T02:00:00Z, in 14h0m0s`},
		{"now", "2026-12-01T12:00:00Z", `plan "p" expired at 2026-12-01T12:00:00Z; set a later expires`, ""},
		{"expired", "2026-11-30T00:00:00Z", `plan "p" expired at 2026-11-30T00:00:00Z; set a later expires`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			line := ""
			if tt.expires != "" {
				line = "  expires = \"" + tt.expires + "\"\n"
			}
			src := "plan \"p\" {\n  goal = \"g\"\n" + line + "  step \"s\" {\n    tool = \"t\"\n  }\n}\n"
			file := filepath.Join(dir, "plan.hcl")
			if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			var w bytes.Buffer
			err := checkExpiry(&w, file, now)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			got := strings.ReplaceAll(w.String(), dir+string(filepath.Separator), "")
			if tt.wantWarn == "" && got != "" || !strings.Contains(got, tt.wantWarn) {
				t.Fatalf("stderr %q, want %q", got, tt.wantWarn)
			}
		})
	}
}
