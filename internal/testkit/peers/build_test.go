package peers

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A slow build shows progress: a line per ten packages compiled, a "still
// building" line on each tick, and at the end how many it compiled; a
// compiler message is kept for the error, not counted. The builder is a
// fake that blocks until the test lets it finish, so no line depends on
// timing.
func TestBuildWithProgress(t *testing.T) {
	cmd := exec.Command("sh", "-c", `
for i in 1 2 3 4 5 6 7 8 9 10; do echo "example.com/p/$i" >&2; done
echo "# example.com/p/x" >&2
echo "p/x.go:1:1: warning: something" >&2
read line
echo example.com/p/11`)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var w SyncBuffer
	ticks := make(chan time.Time)
	done := make(chan error, 1)
	var out []byte
	go func() {
		var err error
		out, err = BuildWithProgress(cmd, &w, ticks, func() time.Duration { return 7 * time.Second })
		done <- err
	}()
	// Once the line of the tenth package is out, the builder waits: one
	// tick then finds exactly ten compiled (a bound on waiting only).
	for deadline := time.Now().Add(time.Minute); !strings.Contains(w.String(), "10 packages compiled"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no progress line for ten packages: %q", w.String())
		}
	}
	ticks <- time.Time{}
	stdin.Close()
	if err := <-done; err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	want := "  10 packages compiled (example.com/p/10)\n" +
		"  still building (7s, 10 packages compiled, last example.com/p/10)\n" +
		"  built in 7s (11 packages compiled)\n"
	if got := w.String(); got != want {
		t.Errorf("progress:\n%s\nwant:\n%s", got, want)
	}
	if !strings.Contains(string(out), "warning: something") {
		t.Errorf("the build's output lacks the compiler message: %q", out)
	}
}

// A failed build returns its error and output, and does not claim it built.
func TestBuildWithProgressFailure(t *testing.T) {
	cmd := exec.Command("sh", "-c", `echo example.com/p/1 >&2; echo "p/x.go:3:2: undefined: y" >&2; exit 1`)
	var w SyncBuffer
	out, err := BuildWithProgress(cmd, &w, nil, func() time.Duration { return time.Second })
	if err == nil {
		t.Fatal("a failed build returned no error")
	}
	if !strings.Contains(string(out), "undefined: y") {
		t.Errorf("output = %q, want the compiler's message", out)
	}
	if strings.Contains(w.String(), "built in") {
		t.Errorf("progress claims a build: %q", w.String())
	}
}
