//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/planlock/planlock/internal/testkit/peers"
	"github.com/planlock/planlock/proxy/ledger/pgstate"
)

// Faults under a running planlock proxy: PostgreSQL backends terminated and
// the head row locked by a foreign session (the database stopped is
// TestReplicasDatabaseDown), and misbehaving stdio upstreams.

const faultsPlan = `
plan "faults" {
  goal  = "exercise faults"
  order = "any"
  step "echo" {
    tool      = "echo"
    max_calls = 1000
    arg "message" { any = true }
  }
}
`

// journalRecords reads the shared state's records.
func journalRecords(t *testing.T, url string) []map[string]any {
	t.Helper()
	data, _, err := pgstate.Journal(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	var recs []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var r map[string]any
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	return recs
}

// Backends of three replicas under load are terminated again and again
// (pg_terminate_backend, as an operator or a failover does): every call
// the upstream received has its allow record and its outcome in the shared
// chain, and audit verify passes.
func TestReplicasBackendsTerminated(t *testing.T) {
	e := newReplicaEnv(t)
	reps := []*replica{e.start(), e.start(), e.start()}
	urls := []string{reps[0].url, reps[1].url, reps[2].url}
	ctx := context.Background()
	stop := make(chan struct{})
	var tl tally
	done := make(chan struct{})
	go func() { defer close(done); load(ctx, t, urls, 6, "bulk", 0, stop, false, &tl) }()
	killed := 0
	for range 20 {
		time.Sleep(100 * time.Millisecond)
		conn, err := pgx.Connect(ctx, e.db)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		err = conn.QueryRow(ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE application_name = 'planlock' AND pid <> pg_backend_pid()) t`).Scan(&n)
		conn.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		killed += n
	}
	close(stop)
	<-done
	for _, r := range reps {
		r.stop() // SIGTERM: the replicas write what is queued and return their leases
	}
	up := e.upstreamCount("bulk")
	allows := map[float64]bool{}
	recs := journalRecords(t, e.db)
	for _, r := range recs {
		if r["type"] == "decision" && r["decision"] == "allow" && r["step"] == "bulk" {
			allows[r["seq"].(float64)] = true
		}
	}
	outcomes := map[float64]bool{}
	for _, r := range recs {
		if ref, ok := r["ref"].(float64); ok && r["type"] == "outcome" && allows[ref] {
			outcomes[ref] = true
		}
	}
	if killed == 0 || up == 0 {
		t.Fatalf("terminated %d backends, upstream received %d calls: the fault was not exercised", killed, up)
	}
	if len(allows) < up || len(outcomes) < up {
		t.Fatalf("the upstream received %d calls; the chain has %d allow records and %d outcomes for them (%d backends terminated)", up, len(allows), len(outcomes), killed)
	}
	t.Logf("%d backends terminated under load: upstream %d calls, %d allow records, %d outcomes, %d refused", killed, up, len(allows), len(outcomes), tl.refused.Load())
	e.verify()
}

// A foreign session idle in a transaction holding the head row: calls to
// the replicas are refused within the attempt's bound, and the answer names
// the lock and its holder; when it lets go, service resumes by itself.
func TestReplicasForeignLockOnHead(t *testing.T) {
	e := newReplicaEnv(t)
	reps := []*replica{e.start(), e.start()}
	ctx := context.Background()
	c, err := dial(ctx, reps[0].url, false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if res, text := echo(ctx, c, "many1"); res != callAllowed {
		t.Fatalf("before the lock: %s", text)
	}
	cfg, err := pgx.ParseConfig(e.db)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["application_name"] = "nightly-report"
	foreign, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer foreign.Close(ctx)
	var pid int
	if err := foreign.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	tx, err := foreign.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT seq FROM planlock_head FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	before := e.upstreamCount("few")
	for i, r := range reps {
		rc, err := dial(ctx, r.url, false)
		if err != nil {
			t.Fatal(err)
		}
		res, text := echo(ctx, rc, fmt.Sprintf("few%d", i))
		rc.Close()
		if res != callRefused || !strings.Contains(text, "lock wait timeout on the head row") ||
			!strings.Contains(text, fmt.Sprintf("pid %d", pid)) || !strings.Contains(text, `"nightly-report"`) {
			t.Fatalf("replica %d with the head row locked: %v %q; want a refusal naming the lock and pid %d", i, res, text, pid)
		}
	}
	if got := e.upstreamCount("few"); got != before {
		t.Fatalf("the upstream received %d calls while the head row was locked", got-before)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if res, text := echo(ctx, c, "many2"); res != callAllowed {
		t.Fatalf("after the foreign session let go: %s", text)
	}
	e.verify()
}

// deafUpstream is a stdio upstream command that ignores SIGTERM, SIGINT
// and SIGHUP and outlives its stdin, with a child (sleep) that does the
// same: its pid file holds "leader child".
func deafUpstream(t *testing.T) (cmd []string, pids func() []int) {
	dir := t.TempDir()
	pidFile, childFile := filepath.Join(dir, "leader"), filepath.Join(dir, "child")
	script := fmt.Sprintf(`trap "" TERM INT HUP; sleep 100000 & echo $! > %s; exec %s --mode deaf --pid-file %s`, childFile, testUpstreamBin, pidFile)
	return []string{"/bin/sh", "-c", script}, func() []int {
		var out []int
		for _, f := range []string{pidFile, childFile} {
			for range 500 {
				b, err := os.ReadFile(f)
				if n, aerr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && aerr == nil {
					out = append(out, n)
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		if len(out) != 2 {
			t.Fatal("the upstream did not write its pids")
		}
		return out
	}
}

// gone reports whether pid has exited (gone, or a zombie nobody reaped).
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err != nil || strings.Contains(string(b), ") Z ")
}

// The upstream's process group is ended on every exit of the proxy, even
// when it ignores its stdin's end and SIGTERM (then SIGKILL after the
// grace period), child included.
func TestProxyEndsItsUpstreamOnEveryExit(t *testing.T) {
	tests := []struct {
		name   string
		listen bool
		end    func(t *testing.T, cmd *exec.Cmd, stdin interface{ Close() error })
	}{
		{"stdio: stdin ends", false, func(t *testing.T, _ *exec.Cmd, stdin interface{ Close() error }) { stdin.Close() }},
		{"stdio: SIGTERM", false, func(t *testing.T, cmd *exec.Cmd, _ interface{ Close() error }) {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}},
		{"stdio: SIGINT", false, func(t *testing.T, cmd *exec.Cmd, _ interface{ Close() error }) {
			_ = cmd.Process.Signal(syscall.SIGINT)
		}},
		{"listen: SIGTERM", true, func(t *testing.T, cmd *exec.Cmd, _ interface{ Close() error }) {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}},
		{"listen: SIGINT", true, func(t *testing.T, cmd *exec.Cmd, _ interface{ Close() error }) {
			_ = cmd.Process.Signal(syscall.SIGINT)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up, pids := deafUpstream(t)
			dir := t.TempDir()
			args := []string{"proxy", "--plan", writePlan(t, faultsPlan), "--insecure-skip-verify", "--state", filepath.Join(dir, "state"), "--no-hold-prs", "--reload-interval", "0"}
			if tt.listen {
				args = append(args, "--listen", "127.0.0.1:0")
			}
			cmd := exec.Command(planlockBin, append(append(args, "--"), up...)...)
			cmd.Env = os.Environ()
			stderr := &peers.SyncBuffer{}
			cmd.Stderr = stderr
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			ps := pids()
			t.Cleanup(func() {
				for _, p := range ps {
					_ = syscall.Kill(p, syscall.SIGKILL)
				}
			})
			if tt.listen {
				rx := regexp.MustCompile(`serving plan`)
				for i := 0; !rx.MatchString(stderr.String()); i++ {
					if i > 3000 {
						t.Fatalf("not serving:\n%s", stderr.String())
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			tt.end(t, cmd, stdin)
			waited := make(chan error, 1)
			go func() { waited <- cmd.Wait() }()
			select {
			case <-waited:
			case <-time.After(60 * time.Second):
				t.Fatalf("the proxy did not exit:\n%s", stderr.String())
			}
			for _, p := range ps {
				if !gone(p) {
					t.Fatalf("upstream process %d outlived the proxy (pids %v)\n%s", p, ps, stderr.String())
				}
			}
		})
	}
}

// One answer line of 768 MiB without a newline from a stdio upstream: the
// call is answered with an error at once and the proxy's peak RSS stays
// near the message limit (16 MiB by default), not the line's size.
func TestProxyHugeUpstreamLine(t *testing.T) {
	dir := t.TempDir()
	c := startRaw(t, "proxy", "--plan", writePlan(t, faultsPlan), "--insecure-skip-verify", "--state", filepath.Join(dir, "state"),
		"--", testUpstreamBin, "--mode", "huge", "--huge-bytes", strconv.Itoa(768<<20))
	before := c.peakRSS()
	a := c.call("echo", `{"message":"hi"}`)
	if a.allowed() || !strings.Contains(a.text(), "larger than the limit of 16777216 bytes") || !strings.Contains(a.text(), "was counted") {
		t.Fatalf("answer %q; want the call refused as too large, counted", a.text())
	}
	// The rest of the line still streams through the proxy, dropped: the
	// peak is read once the proxy has read all of it.
	for i := 0; readBytes(t, c.cmd.Process.Pid) < 768<<20; i++ {
		if i > 12000 {
			t.Fatalf("the proxy read %d bytes of the line", readBytes(t, c.cmd.Process.Pid))
		}
		time.Sleep(10 * time.Millisecond)
	}
	peak := c.peakRSS()
	t.Logf("peak RSS before the call %d MiB, after a 768 MiB line %d MiB", before>>20, peak>>20)
	if peak > 256<<20 {
		t.Fatalf("peak RSS %d MiB after a 768 MiB line past a 16 MiB limit", peak>>20)
	}
}

// readBytes is what pid has read with read(2) and the like (rchar).
func readBytes(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		t.Fatalf("read the proxy's I/O counts: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "rchar:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
