package proxy

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/planlock/planlock/proxy/ledger"
)

// TestStateErrorsNameNoLocalPath: what a client reads of a state's error
// keeps its cause and loses every local path.
func TestStateErrorsNameNoLocalPath(t *testing.T) {
	dir := "/home/alice/.local/state/planlock/refund"
	write := &os.PathError{Op: "write", Path: dir + "/audit.jsonl", Err: syscall.ENOSPC}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"disk fault", &ledger.FaultError{Err: fmt.Errorf("%w: write %s/audit.jsonl: %w", ledger.ErrFailed, dir, write)}, "no space left on device"},
		{"other state error", fmt.Errorf("open audit log: %w", &os.PathError{Op: "open", Path: dir + "/audit.jsonl", Err: syscall.EACCES}), "permission denied"},
		{"quoted path", errors.New(`exec: "/opt/tools/server": no such file`), "no such file"},
		{"closed", ledger.ErrClosed, "shutting down"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := stateError(tt.err)
			if strings.Contains(got, "/home/") || strings.Contains(got, "/opt/") || strings.Contains(got, "audit.jsonl") {
				t.Fatalf("%q shows a local path", got)
			}
			if !strings.Contains(got, tt.want) {
				t.Fatalf("%q lost the cause %q", got, tt.want)
			}
		})
	}
	if got := redactPaths("read input/output error at /dev/sda1"); got != "read input/output error at <local path>" {
		t.Fatalf("redactPaths: %q", got)
	}
}
