//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/planlock/planlock/internal/testkit/peers"
)

// Disk faults under a running planlock proxy, on real small file systems
// (root only: CI runs as root): the disk full (a tmpfs mounted with a
// size), a file system turned read-only under the proxy (ext4 on a loop
// device whose backing tmpfs fills: the device fails the writes of the
// journal's fdatasync, ext4 aborts its journal and remounts itself
// read-only), and EIO from a file system shut down under the proxy
// (EXT4_IOC_SHUTDOWN). Under each the proxy refuses every call it cannot
// record, forwards none it did not count and says so once on stderr. A
// full disk clears in place, and the proxy serves again by itself; the
// other two need the file system remounted, so the proxy is stopped, the
// file system repaired and the proxy started again, with every call the
// upstream received counted.

const diskFaultPlan = `
plan "diskfault" {
  goal  = "count on a failing disk"
  order = "any"
  step "echo" {
    tool      = "echo"
    max_calls = 150
    arg "message" { any = true }
  }
}
`

// startProxyStderr is startProxyProcess with the proxy's stderr kept.
func startProxyStderr(t *testing.T, stderr *peers.SyncBuffer, args ...string) *proxyProcess {
	t.Helper()
	pp := &proxyProcess{}
	tr := transport.NewStdioWithOptions(planlockBin, nil, args,
		transport.WithCommandFunc(func(ctx context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
			pp.cmd = exec.Command(command, args...)
			pp.cmd.Env = os.Environ()
			pp.cmd.Stderr = stderr
			return pp.cmd, nil
		}))
	c := client.NewClient(tr)
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "diskfault-test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	pp.client = c
	t.Cleanup(func() { c.Close() })
	return pp
}

// waitFor waits until the proxy's stderr says want. Not a timing
// assertion: the bound only ends a test whose proxy never says it.
func waitFor(t *testing.T, stderr *peers.SyncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(stderr.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the proxy never said %q:\n%s", want, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writableMetric reads planlock_state_writable from the metrics address
// the proxy logged.
func writableMetric(t *testing.T, log string) string {
	t.Helper()
	m := regexp.MustCompile(`planlock: metrics on (http://\S+/metrics)`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no metrics address in the log:\n%s", log)
	}
	res, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	v := regexp.MustCompile(`(?m)^planlock_state_writable\{plan="diskfault"\} (\S+)$`).FindSubmatch(body)
	if v == nil {
		return ""
	}
	return string(v[1])
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// mountTmpfs mounts a tmpfs of size at dir, or skips the test.
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s); the disk-fault tests need a real small file system", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
}

// fill writes a file on dir's file system until it is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", path, err)
			}
			break
		}
	}
	// The last pages of the file system, one at a time.
	for {
		if _, err := f.Write(buf[:512]); err != nil {
			return
		}
	}
}

// ext4IOCShutdown is EXT4_IOC_SHUTDOWN (_IOR('X', 125, __u32)); flag 2 is
// EXT4_GOING_FLAGS_NOLOGFLUSH: the file system fails every later I/O with
// EIO, as a dead disk does.
const ext4IOCShutdown = 0x8004587d

type diskFault struct {
	name string
	// setup mounts the file system for the state at root and returns the
	// state directory, the fault and how to clear it: in place (clear),
	// or once the proxy stopped (repair).
	setup func(t *testing.T, root string) (state string, fault func(), fix fixup)
}

// during, when set, checks the fault is what the case says, while the
// proxy refuses.
type fixup struct{ clear, repair, during func() }

// remount unmounts mnt and mounts dev there again, after a file system
// check: the repair of a file system that aborted.
func remount(t *testing.T, dev, mnt string) {
	t.Helper()
	run(t, "umount", mnt)
	_ = exec.Command("e2fsck", "-p", dev).Run() // exit 1: errors fixed
	run(t, "mount", dev, mnt)
}

var diskFaults = []diskFault{
	{name: "disk full (tmpfs)", setup: func(t *testing.T, root string) (string, func(), fixup) {
		mnt := filepath.Join(root, "fs")
		mountTmpfs(t, mnt, "1m")
		filler := filepath.Join(mnt, "filler")
		return filepath.Join(mnt, "state"), func() { fill(t, filler) }, fixup{clear: func() {
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
		}}
	}},
	{name: "read-only (ext4 on a loop device that fails writes)", setup: func(t *testing.T, root string) (string, func(), fixup) {
		back := filepath.Join(root, "back")
		mountTmpfs(t, back, "8m")
		img := filepath.Join(back, "img")
		run(t, "truncate", "-s", "64M", img)
		run(t, "mkfs.ext4", "-q", "-F", img)
		out, err := exec.Command("losetup", "-f", "--show", img).CombinedOutput()
		if err != nil {
			t.Skipf("no loop device here (%v: %s)", err, bytes.TrimSpace(out))
		}
		dev := strings.TrimSpace(string(out))
		t.Cleanup(func() { _ = exec.Command("losetup", "-d", dev).Run() })
		mnt := filepath.Join(root, "ext")
		if err := os.MkdirAll(mnt, 0o700); err != nil {
			t.Fatal(err)
		}
		run(t, "mount", "-o", "errors=continue", dev, mnt)
		t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
		filler := filepath.Join(back, "filler")
		// The backing store full: the loop device fails the writes of
		// the journal's fdatasync.
		return filepath.Join(mnt, "state"), func() { fill(t, filler) }, fixup{repair: func() {
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			remount(t, dev, mnt)
		}, during: func() {
			// The device's errors aborted ext4's journal: it remounted
			// itself read-only under the proxy.
			if err := os.WriteFile(filepath.Join(mnt, "probe"), nil, 0o600); !errors.Is(err, syscall.EROFS) {
				t.Fatalf("the file system is not read-only during the fault: %v", err)
			}
		}}
	}},
	{name: "EIO (ext4 shut down)", setup: func(t *testing.T, root string) (string, func(), fixup) {
		img := filepath.Join(root, "img")
		run(t, "truncate", "-s", "64M", img)
		run(t, "mkfs.ext4", "-q", "-F", img)
		out, err := exec.Command("losetup", "-f", "--show", img).CombinedOutput()
		if err != nil {
			t.Skipf("no loop device here (%v: %s)", err, bytes.TrimSpace(out))
		}
		dev := strings.TrimSpace(string(out))
		t.Cleanup(func() { _ = exec.Command("losetup", "-d", dev).Run() })
		mnt := filepath.Join(root, "ext")
		if err := os.MkdirAll(mnt, 0o700); err != nil {
			t.Fatal(err)
		}
		run(t, "mount", dev, mnt)
		t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
		return filepath.Join(mnt, "state"), func() {
			d, err := os.Open(mnt)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			flag := uint32(2)
			if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, d.Fd(), ext4IOCShutdown, uintptr(unsafe.Pointer(&flag))); e != 0 {
				t.Skipf("EXT4_IOC_SHUTDOWN: %v", e)
			}
		}, fixup{repair: func() { remount(t, dev, mnt) }}
	}},
}

func TestDiskFaultsUnderARunningProxy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small file system (CI runs as root)")
	}
	for _, df := range diskFaults {
		t.Run(df.name, func(t *testing.T) {
			root := t.TempDir()
			state, fault, fix := df.setup(t, root)
			callsLog := filepath.Join(root, "calls.jsonl") // not on the faulty disk
			stderr := &peers.SyncBuffer{}
			args := []string{"proxy", "--plan", writePlan(t, diskFaultPlan), "--insecure-skip-verify",
				"--state", state, "--metrics-listen", "127.0.0.1:0", "--", testUpstreamBin, "--calls-log", callsLog}
			pp := startProxyStderr(t, stderr, args...)
			echo := map[string]any{"message": "hi"}
			granted := 0
			for range 2 {
				if text, isErr := pp.call(t, "echo", echo); isErr {
					t.Fatalf("before the fault: %s", text)
				}
				granted++
			}
			fault()
			// A record may still fit in a page the journal has: calls go
			// through until one cannot be recorded.
			var refusal string
			for range 100 {
				text, isErr := pp.call(t, "echo", echo)
				if isErr {
					refusal = text
					break
				}
				granted++
			}
			if refusal == "" {
				t.Fatal("100 calls were granted on a failed disk")
			}
			t.Logf("after %d calls granted: %s", granted, refusal)
			if !strings.Contains(refusal, "could not record the call, so it was not forwarded") ||
				!strings.Contains(refusal, "calls are refused until it can be written again") {
				t.Fatalf("refusal: %q", refusal)
			}
			if strings.Contains(refusal, root) || strings.Contains(refusal, "audit.jsonl") {
				t.Fatalf("the refusal shows the agent a local path: %q", refusal)
			}
			for range 5 {
				if text, isErr := pp.call(t, "echo", echo); !isErr || !strings.Contains(text, "not forwarded") {
					t.Fatalf("a call during the fault: %v %q", isErr, text)
				}
			}
			if got := strings.Count(readString(callsLog), `"tool":"echo"`); got != granted {
				t.Fatalf("the upstream received %d calls, %d were granted: a call was forwarded uncounted", got, granted)
			}
			// The report comes from the ledger's writer, beside the
			// refusal: waited for, with a bound for one that never comes.
			waitFor(t, stderr, "planlock: state fault:")
			if n := strings.Count(stderr.String(), "planlock: state fault:"); n != 1 {
				t.Fatalf("stderr reports the fault %d times, want once:\n%s", n, stderr.String())
			}
			if fix.during != nil {
				fix.during()
			}
			if got := writableMetric(t, stderr.String()); got != "0" {
				t.Fatalf("planlock_state_writable during the fault: %q, want 0", got)
			}
			if fix.repair != nil {
				// The file system stays read-only or dead until it is
				// remounted: the proxy keeps refusing meanwhile. It is
				// stopped, the file system repaired, and a new proxy
				// counts every call the upstream received.
				pp.client.Close()
				_ = pp.cmd.Wait()
				fix.repair()
				stderr = &peers.SyncBuffer{}
				pp = startProxyStderr(t, stderr, args...)
			} else {
				fix.clear()
			}
			if fix.repair == nil {
				waitFor(t, stderr, "planlock: state writable again") // it retries every second
			}
			if got := writableMetric(t, stderr.String()); got != "1" {
				t.Fatalf("planlock_state_writable once the state is writable: %q, want 1", got)
			}
			for range 3 {
				if text, isErr := pp.call(t, "echo", echo); isErr {
					t.Fatalf("after the fault cleared: %s\n%s", text, stderr.String())
				}
				granted++
			}
			if got := strings.Count(readString(callsLog), `"tool":"echo"`); got != granted {
				t.Fatalf("the upstream received %d calls, %d were granted", got, granted)
			}
			out := stderr.String()
			switch {
			case fix.repair != nil && strings.Contains(out, "planlock: state fault:"):
				t.Fatalf("the proxy on the repaired file system reports a fault:\n%s", out)
			case fix.repair == nil && (strings.Count(out, "planlock: state fault:") != 1 || strings.Count(out, "planlock: state writable again") != 1):
				t.Fatalf("stderr, want one fault and one recovery:\n%s", out)
			}
			pp.client.Close()
			_ = pp.cmd.Wait()
			journal := filepath.Join(state, "audit.jsonl")
			if _, err := os.Stat(journal); err != nil {
				matches, _ := filepath.Glob(filepath.Join(state, "*", "audit.jsonl"))
				if len(matches) != 1 {
					t.Fatalf("no journal in %s: %v", state, err)
				}
				journal = matches[0]
			}
			if out, err := exec.Command(planlockBin, "audit", "verify", journal).CombinedOutput(); err != nil {
				t.Fatalf("audit verify after the fault: %v\n%s", err, out)
			}
			// Every call the upstream received has its allow record.
			allows := strings.Count(readString(journal), `"decision":"allow"`)
			if allows < granted {
				t.Fatalf("%d allow records for %d calls the upstream received", allows, granted)
			}
		})
	}
}
