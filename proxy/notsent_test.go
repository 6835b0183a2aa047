package proxy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// upstreamPID is the pid of the current stdio upstream process, 0 if none.
func (h *harness) upstreamPID() int {
	u := h.proxy.up
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.conn == nil {
		return 0
	}
	if tr, ok := u.conn.tr.(*stdioTransport); ok && tr.cmd.Process != nil {
		return tr.cmd.Process.Pid
	}
	return 0
}

// auditOutcomes lists the error text of every outcome record.
func (h *harness) auditOutcomes() []string {
	h.t.Helper()
	f, err := os.Open(h.audit)
	if err != nil {
		h.t.Fatal(err)
	}
	defer f.Close()
	var errs []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r struct {
			Type  string `json:"type"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err == nil && r.Type == "outcome" {
			errs = append(errs, r.Error)
		}
	}
	return errs
}

// exited waits until pid has exited, every thread of it (a zombie leader
// with no other thread, or reaped and gone).
func exited(pid int) {
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil || strings.Contains(string(b), ") Z ") && len(tasks) <= 1 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// A call made right after the upstream died (SIGKILL, then the call at
// once), 20 times: it is refused and not counted, or counted with an answer
// and an outcome record that say it was not sent. Once the process has
// exited nothing can read the call, so no answer may claim that it "may or
// may not have run". Racing the kill itself, a dying process may still
// take the line from its pipe (and never act on it): only then is that the
// answer. Either way the count is exactly the calls whose answers say they
// were counted, and the upstreams received none.
func TestCallRightAfterTheUpstreamDied(t *testing.T) {
	for _, tt := range []struct {
		name       string
		waitExit   bool
		mayHaveRun bool // answers that the call may or may not have run are allowed
	}{
		{"after the exit", true, false},
		{"racing the kill", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const trials = 20
			dir := t.TempDir()
			log := dir + "/calls.jsonl"
			plan := strings.Replace(testPlan, "max_calls = 10", "max_calls = 1000", 1)
			h := newHarness(t, plan, harnessOpts{command: []string{testUpstreamBin, "--mode", "normal", "--calls-log", log}})
			h.callsLog = log
			// Up again before the harness stops, so that no restart is
			// under way (its log would outlive the test).
			t.Cleanup(func() { _ = h.proxy.WaitUpstream(h.ctx) })
			counted, refused, lost := 0, 0, 0
			for i := range trials {
				if err := h.proxy.WaitUpstream(h.ctx); err != nil {
					t.Fatal(err)
				}
				pid := h.upstreamPID()
				if pid == 0 {
					t.Fatal("no upstream process")
				}
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				if tt.waitExit {
					exited(pid)
				}
				text, isErr := h.call("echo", `{"message":"hi"}`)
				switch {
				case !isErr:
					t.Fatalf("trial %d: a call to a killed upstream succeeded: %q", i, text)
				case strings.Contains(text, "the call was not forwarded and not counted"):
					refused++
				case strings.Contains(text, "the call was not run, but it was counted"):
					counted++
				case tt.mayHaveRun && strings.Contains(text, "upstream connection lost") && strings.Contains(text, "may or may not have run"):
					lost++
				default:
					t.Fatalf("trial %d: the answer does not say what happened to the call: %q", i, text)
				}
			}
			if got := h.upstreamCalls()["echo"]; got != 0 {
				t.Fatalf("the killed upstreams received %d calls", got)
			}
			if got := h.ledger.Progress(h.plan.Digest).Calls(0); got != counted+lost {
				t.Fatalf("counted %d calls; %d answers said they were counted (%d refused)", got, counted+lost, refused)
			}
			notSent := 0
			for _, e := range h.auditOutcomes() {
				if strings.HasPrefix(e, "not sent to the upstream") {
					notSent++
				}
			}
			if notSent != counted {
				t.Fatalf("%d outcome records say not sent, %d answers said so", notSent, counted)
			}
			h.verifyAudit()
			t.Logf("%d trials: %d refused uncounted, %d counted and answered not sent, %d read by the dying process", trials, refused, counted, lost)
		})
	}
}
