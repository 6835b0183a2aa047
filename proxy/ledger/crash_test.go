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
	crashSteps    = 4
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
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
	l, err := Open(ctx, Options{Dir: dir})
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
		t.Run("max_calls="+strconv.Itoa(max), func(t *testing.T) { crashRounds(t, max) })
	}
}

// crashRounds kills children at random moments until they used up every
// step, checking after each kill that the durable counts cover every call
// granted and never pass crashMax.
func crashRounds(t *testing.T, crashMax int) {
	dir := t.TempDir()
	granted := make([]int, crashSteps)
	done, rounds := false, 0
	for round := 0; !done; round++ {
		rounds++
		if round > 50 {
			t.Fatal("child never used up the plan")
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, crashMaxEnv+"="+strconv.Itoa(crashMax))
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
		f, _ = os.Open(dir + "/audit.jsonl")
		if _, err := Verify(f); err != nil {
			t.Fatalf("round %d: journal after reopen: %v", round, err)
		}
		f.Close()
	}
	settled := 0
	for _, r := range readRecords(t, dir+"/audit.jsonl") {
		if r.Type == typeLease && strings.Contains(r.Note, "count as used") {
			settled++
		}
	}
	l := openT(t, Options{Dir: dir})
	t.Logf("%d processes killed with SIGKILL; %d lease settlements", rounds, settled)
	if crashMax >= 2*leaseShare && settled == 0 {
		t.Fatal("no kill landed inside a lease: the test did not exercise leases")
	}
	for s := 0; s < crashSteps; s++ {
		if got := l.Progress(digest).Calls(s); got != crashMax {
			t.Fatalf("at the end step %d has %d calls, want exactly %d", s, got, crashMax)
		}
	}
}
