package ledger

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	crashChildEnv = "PLANLOCK_LEDGER_CRASH_CHILD"
	crashMaxEnv   = "PLANLOCK_LEDGER_CRASH_MAX"
	// crashRotateEnv sets the child's RotateSize; crashStopEnv makes it
	// stop its first rotation at that step (see rotateStep) until killed.
	crashRotateEnv = "PLANLOCK_LEDGER_CRASH_ROTATE"
	crashRawEnv    = "PLANLOCK_LEDGER_CRASH_RAW" // Options.RawAppends
	crashStopEnv   = "PLANLOCK_LEDGER_CRASH_STOP"
	crashSteps     = 4
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		if step := os.Getenv(crashStopEnv); step != "" {
			rotateStopChild(dir, step)
			return
		}
		crashChild(dir)
		return
	}
	os.Exit(m.Run())
}

// crashChild reserves from several goroutines until every step is used up,
// printing "granted STEP" only after Reserve returned (the record is durable),
// and waits to be killed.
func crashChild(dir string) {
	ctx := context.Background()
	crashMax, _ := strconv.Atoi(os.Getenv(crashMaxEnv))
	rotate, _ := strconv.ParseInt(os.Getenv(crashRotateEnv), 10, 64)
	l, err := Open(ctx, Options{Dir: dir, RotateSize: rotate, RawAppends: os.Getenv(crashRawEnv) != ""})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(3)
	}
	// Checkpoint often, so kills also land during and after checkpoints.
	l.mu.Lock()
	l.checkpointEvery = 7
	l.mu.Unlock()
	var (
		out sync.Mutex
		wg  sync.WaitGroup
	)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			exhausted := map[int]bool{}
			for len(exhausted) < crashSteps {
				step := rand.IntN(crashSteps)
				c := Call{PlanDigest: digest, Step: "s" + strconv.Itoa(step), StepIndex: step, Tool: "t", Args: []byte(`{"n":1}`)}
				tk, err := l.Reserve(ctx, Reservation{Call: c, MaxCalls: crashMax})
				if errors.Is(err, ErrExhausted) {
					exhausted[step] = true
					_ = l.Block(ctx, c, err.Error())
					continue
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, "child reserve:", err)
					os.Exit(3)
				}
				out.Lock()
				fmt.Fprintf(os.Stdout, "granted %d\n", step)
				out.Unlock()
				_ = l.Complete(ctx, tk, Outcome{OK: rand.IntN(2) == 0})
			}
		}()
	}
	wg.Wait()
	fmt.Fprintln(os.Stdout, "done")
	select {} // wait for the kill
}

func TestCrashNeverGrantsExtraCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	// 20 calls a step are counted one by one; 3000 mostly in leases.
	for _, max := range []int{20, 3000} {
		t.Run("max_calls="+strconv.Itoa(max), func(t *testing.T) { crashRounds(t, max, 0, false) })
	}
	// A journal rotated every few records: kills land in rotations too.
	t.Run("max_calls=20,rotating", func(t *testing.T) { crashRounds(t, 20, 2000, false) })
	t.Run("max_calls=20,raw_appends", func(t *testing.T) { crashRounds(t, 20, 0, true) })
}

// crashRounds kills children at random moments until they used up every
// step, checking after each kill that the durable counts cover every call
// granted and never pass crashMax.
func crashRounds(t *testing.T, crashMax int, rotate int64, raw bool) {
	dir := t.TempDir()
	granted := make([]int, crashSteps)
	done, rounds := false, 0
	for round := 0; !done; round++ {
		rounds++
		if round > 50 {
			t.Fatal("child never used up the plan")
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, crashMaxEnv+"="+strconv.Itoa(crashMax), crashRotateEnv+"="+strconv.FormatInt(rotate, 10))
		if raw {
			cmd.Env = append(cmd.Env, crashRawEnv+"=1")
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAfter := rand.IntN(12 * crashMax / 20)
		sc := bufio.NewScanner(stdout)
		n := 0
		for sc.Scan() {
			line := sc.Text()
			if line == "done" {
				done = true
				break
			}
			step, err := strconv.Atoi(strings.TrimPrefix(line, "granted "))
			if err != nil {
				t.Fatalf("child said %q", line)
			}
			granted[step]++
			n++
			if n >= killAfter {
				break
			}
		}
		// A random moment inside the child's next reservations.
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		// Count what the child printed before it died.
		for sc.Scan() {
			if step, err := strconv.Atoi(strings.TrimPrefix(sc.Text(), "granted ")); err == nil {
				granted[step]++
			}
		}
		werr := cmd.Wait()
		if ee, ok := werr.(*exec.ExitError); !ok || ee.ExitCode() == 3 {
			t.Fatalf("round %d: child ended with %v: %s", round, werr, stderr.String())
		}

		// Before repair the journal verifies, except possibly a torn last line.
		f, err := os.Open(dir + "/audit.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		_, verr := Verify(f)
		f.Close()
		var ve *VerifyError
		if verr != nil && !(errors.As(verr, &ve) && ve.Torn) {
			t.Fatalf("round %d: journal after kill: %v", round, verr)
		}

		l, err := Open(context.Background(), Options{Dir: dir})
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		p := l.Progress(digest)
		for s := 0; s < crashSteps; s++ {
			if p.Calls(s) > crashMax {
				t.Fatalf("round %d: step %d has %d calls, more than max_calls %d", round, s, p.Calls(s), crashMax)
			}
			if p.Calls(s) < granted[s] {
				t.Fatalf("round %d: step %d: %d calls durable but the child was granted %d", round, s, p.Calls(s), granted[s])
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := VerifySeries(seriesOf(t, dir+"/audit.jsonl"), nil); err != nil {
			t.Fatalf("round %d: journal after reopen: %v", round, err)
		}
		if _, err := os.Stat(dir + "/audit.jsonl" + nextSuffix); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("round %d: an unfinished rotation left after reopen: %v", round, err)
		}
	}
	settled := 0
	files := seriesOf(t, dir+"/audit.jsonl")
	if _, _, err := walkSeries(openFiles(t, files), nil, func(r *parsed) error {
		if r.Type == typeLease && strings.Contains(r.Note, "count as used") {
			settled++
		}
		return nil
	}, false); err != nil {
		t.Fatal(err)
	}
	if rotate > 0 && len(files) < 3 {
		t.Fatalf("only %d journal files: the rotating run did not rotate", len(files))
	}
	l := openT(t, Options{Dir: dir})
	t.Logf("%d processes killed with SIGKILL; %d lease settlements; %d journal files", rounds, settled, len(files))
	if crashMax >= 2*leaseShare && settled == 0 {
		t.Fatal("no kill landed inside a lease: the test did not exercise leases")
	}
	for s := 0; s < crashSteps; s++ {
		if got := l.Progress(digest).Calls(s); got != crashMax {
			t.Fatalf("at the end step %d has %d calls, want exactly %d", s, got, crashMax)
		}
	}
}

// rotateStopChild reserves two calls, printing "granted" after each, with a
// journal that rotates at once; its first rotation stops at step (printing
// "at STEP") and waits there to be killed.
func rotateStopChild(dir, step string) {
	ctx := context.Background()
	l, err := Open(ctx, Options{Dir: dir, RotateSize: 1, SyncEachCall: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(3)
	}
	l.rotateHook = func(s string) error {
		if s == step {
			fmt.Fprintln(os.Stdout, "at "+s)
			select {} // the kill lands here
		}
		return nil
	}
	for i := 0; i < 3; i++ {
		c := Call{PlanDigest: digest, Step: "s0", StepIndex: 0, Tool: "t", Args: []byte(`{"n":1}`)}
		if _, err := l.Reserve(ctx, Reservation{Call: c, MaxCalls: 10}); err != nil {
			fmt.Fprintln(os.Stderr, "child reserve:", err)
			os.Exit(3)
		}
		fmt.Fprintln(os.Stdout, "granted")
	}
	select {}
}

// A SIGKILL at each step of a rotation (the child is stopped there, then
// killed) loses no granted call, and the next Open finishes or undoes the
// rotation: the journal's files verify as one series.
func TestKillDuringRotation(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	for _, step := range []string{"created", "written", "linked", "renamed"} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, crashStopEnv+"="+step)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			granted := 0
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if sc.Text() == "granted" {
					granted++
				}
				if sc.Text() == "at "+step {
					break
				}
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			for sc.Scan() {
				if sc.Text() == "granted" {
					granted++
				}
			}
			werr := cmd.Wait()
			if ee, ok := werr.(*exec.ExitError); !ok || ee.ExitCode() == 3 {
				t.Fatalf("child ended with %v: %s", werr, stderr.String())
			}
			if granted != 2 {
				t.Fatalf("child granted %d calls before the rotation stopped, want 2", granted)
			}
			audit := dir + "/audit.jsonl"
			if step == "created" {
				if fi, err := os.Stat(audit + nextSuffix); err != nil || fi.Size() != 0 {
					t.Fatalf("the kill did not leave an empty next file: %v", err)
				}
			}
			l, err := Open(context.Background(), Options{Dir: dir})
			if err != nil {
				t.Fatalf("Open after a kill at %q: %v", step, err)
			}
			if got := l.Progress(digest).Calls(0); got != granted {
				t.Fatalf("calls = %d after a kill at %q, want %d", got, step, granted)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(audit + nextSuffix); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("next file left after Open: %v", err)
			}
			files := seriesOf(t, audit)
			if _, res, err := VerifySeries(files, nil); err != nil || res.First != 1 {
				t.Fatalf("series %v after a kill at %q: %+v, %v", files, step, res, err)
			}
		})
	}
}
