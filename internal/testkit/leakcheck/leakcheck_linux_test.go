package leakcheck

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// An orphan (a sleep whose shell exited at once, as an upstream outlives a
// killed relay) is found as the test process's descendant, named, and ended;
// once it is gone Check passes.
func TestCheckFindsAndEndsAnOrphan(t *testing.T) {
	if err := Start(); err != nil {
		t.Fatal(err)
	}
	if err := Check(0); err != nil {
		t.Fatalf("before the orphan: %v", err)
	}
	out, err := exec.Command("sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("sleep's pid %q: %v", out, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	ds, err := Descendants(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range ds {
		if d.PID == pid {
			found = true
			if d.PPID != os.Getpid() {
				t.Errorf("the orphan's parent = %d, want the test process %d (the subreaper)", d.PPID, os.Getpid())
			}
			if !strings.Contains(d.Cmdline, "sleep 300") {
				t.Errorf("cmdline = %q", d.Cmdline)
			}
		}
	}
	if !found {
		t.Fatalf("the orphan %d is not among the descendants %v", pid, ds)
	}

	err = Check(0)
	if err == nil || !strings.Contains(err.Error(), "pid "+strconv.Itoa(pid)) || !strings.Contains(err.Error(), "sleep 300") {
		t.Fatalf("Check = %v, want an error naming pid %d (sleep 300)", err, pid)
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
		t.Fatalf("reap the orphan: %v", err)
	}
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("the orphan ended with %v, want killed by Check", ws)
	}
	if err := Check(0); err != nil {
		t.Errorf("after the orphan was ended: %v", err)
	}
}

func TestParseStat(t *testing.T) {
	tests := []struct {
		in         string
		ppid, pgid int
		state      string
		ok         bool
	}{
		{"123 (testupstream) S 45 120 120 0 -1", 45, 120, "S", true},
		{"123 (a) b) (c) Z 1 7 0", 1, 7, "Z", true},
		{"123 (x", 0, 0, "", false},
		{"123 (x) S 1", 0, 0, "", false},
		{"123 (x) S abc 4", 0, 0, "", false},
	}
	for _, tt := range tests {
		ppid, pgid, state, ok := parseStat(tt.in)
		if ppid != tt.ppid || pgid != tt.pgid || state != tt.state || ok != tt.ok {
			t.Errorf("parseStat(%q) = %d, %d, %q, %v; want %d, %d, %q, %v", tt.in, ppid, pgid, state, ok, tt.ppid, tt.pgid, tt.state, tt.ok)
		}
	}
}

// EndGroup ends the process a command's child left behind in its group (the
// stdio server an agent started and did not stop) once the command exited.
func TestEndGroupEndsWhatTheCommandLeft(t *testing.T) {
	if err := Start(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!")
	OwnGroup(cmd)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("sleep's pid %q: %v", out, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if m := groupMembers(cmd.Process.Pid); len(m) != 1 || m[0] != pid {
		t.Fatalf("group %d members = %v, want the sleep %d alone", cmd.Process.Pid, m, pid)
	}
	EndGroup(cmd, 0)
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
		t.Fatalf("reap the sleep: %v", err)
	}
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("the sleep ended with %v, want killed by EndGroup", ws)
	}
	if err := Check(0); err != nil {
		t.Error(err)
	}
}
