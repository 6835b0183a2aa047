package ledger

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestDiskFaultRefusesThenResumes: a journal write or fdatasync that fails
// makes the ledger refuse every call, with an error that names no local
// path to a client, reported once; once the disk takes writes again the
// ledger recovers by itself, with a journal that verifies (a record torn
// by the failed write cut) and counts that never fall below what was
// granted, nor let a call pass max_calls.
func TestDiskFaultRefusesThenResumes(t *testing.T) {
	tests := []struct {
		name  string
		errno syscall.Errno
		sync  bool // the fdatasync fails, not the write
		max   int  // the step's max_calls: 400 counts in leases
	}{
		{name: "disk full, torn write", errno: syscall.ENOSPC, max: 10},
		{name: "read-only, torn write", errno: syscall.EROFS, max: 10},
		{name: "EIO on fdatasync", errno: syscall.EIO, sync: true, max: 10},
		{name: "disk full inside a lease", errno: syscall.ENOSPC, max: 400},
		{name: "EIO on fdatasync inside a lease", errno: syscall.EIO, sync: true, max: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			notes := make(chan error, 16)
			l, err := Open(ctx, Options{Dir: dir, RetryInterval: 5 * time.Millisecond, FlushInterval: 5 * time.Millisecond,
				OnFault: func(err error) { notes <- err }})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			var broken atomic.Bool
			l.writeHook = func(f *os.File, b []byte) (int, error) {
				if broken.Load() && !tt.sync {
					n, _ := f.Write(b[:len(b)/2]) // torn: half a record reached the file
					return n, &os.PathError{Op: "write", Path: f.Name(), Err: tt.errno}
				}
				return f.Write(b)
			}
			l.syncHook = func(f *os.File, _ uint64, _ bool) error {
				if broken.Load() && tt.sync {
					return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: tt.errno}
				}
				return f.Sync()
			}
			rv := Reservation{Call: Call{PlanDigest: "sha256:p", Step: "s", Tool: "t", Args: []byte(`{}`)}, MaxCalls: tt.max}
			granted := 0
			reserve := func() error {
				tk, err := l.Reserve(ctx, rv)
				if err == nil {
					granted++
					return l.Complete(ctx, tk, Outcome{OK: true})
				}
				return err
			}
			for range 3 {
				if err := reserve(); err != nil {
					t.Fatal(err)
				}
			}
			broken.Store(true)
			var refused error
			for i := 0; refused == nil && i < 1000; i++ {
				// Inside a durable lease a call needs no sync: the
				// fault shows at the first write or sync that fails.
				if err := reserve(); err != nil {
					refused = err
				}
			}
			if refused == nil {
				t.Fatal("every call was granted while the disk failed")
			}
			var fe *FaultError
			if !errors.Is(refused, ErrUnavailable) || !errors.As(refused, &fe) {
				t.Fatalf("refused with %v, want a FaultError", refused)
			}
			if !errors.Is(refused, tt.errno) {
				t.Fatalf("refused with %v, which loses the cause %v", refused, tt.errno)
			}
			if pub := fe.Public(); strings.Contains(pub, dir) || strings.Contains(pub, auditName) || !strings.Contains(pub, tt.errno.Error()) {
				t.Fatalf("the client's text %q names a path or not the cause", pub)
			}
			if got := <-notes; !errors.Is(got, ErrUnavailable) {
				t.Fatalf("OnFault(%v), want the fault", got)
			}
			for range 5 {
				if err := reserve(); !errors.Is(err, ErrUnavailable) {
					t.Fatalf("a call during the fault: %v, want it refused", err)
				}
			}
			if !errors.Is(l.Fault(), ErrUnavailable) {
				t.Fatalf("Fault() = %v during the fault", l.Fault())
			}
			broken.Store(false)
			if got := <-notes; got != nil {
				t.Fatalf("OnFault(%v) once the disk works, want nil (recovered)", got)
			}
			select {
			case n := <-notes:
				t.Fatalf("OnFault told again (%v): once per change of state", n)
			default:
			}
			if err := reserve(); err != nil {
				t.Fatalf("after recovery: %v", err)
			}
			used := l.Progress("sha256:p").Calls(0)
			if used < granted || used > tt.max {
				t.Fatalf("%d calls counted after recovery, %d granted (max_calls %d)", used, granted, tt.max)
			}
			if err := l.Close(); err != nil {
				t.Fatalf("close after recovery: %v", err)
			}
			f, err := os.Open(filepath.Join(dir, auditName))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := Verify(f); err != nil {
				t.Fatalf("the journal after recovery: %v", err)
			}
			l2, err := Open(ctx, Options{Dir: dir})
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			defer l2.Close()
			if got := l2.Progress("sha256:p").Calls(0); got < granted {
				t.Fatalf("reopened with %d calls, %d were granted", got, granted)
			}
			for {
				if _, err := l2.Reserve(ctx, rv); err != nil {
					break
				}
				granted++
			}
			if granted > tt.max {
				t.Fatalf("%d calls granted in all, max_calls %d", granted, tt.max)
			}
		})
	}
}
