package pgstate_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/planlock/planlock/internal/testkit/pgtest"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/proxy/ledger/pgstate"
)

// auditRecords reads the chain and checks it with the journal file's Verify.
func auditRecords(t *testing.T, url string) []map[string]any {
	t.Helper()
	if _, _, err := pgstate.Verify(context.Background(), url); err != nil {
		t.Fatalf("audit verify: %v", err)
	}
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

func count(recs []map[string]any, typ, decision string) int {
	n := 0
	for _, r := range recs {
		if r["type"] == typ && (decision == "" || r["decision"] == decision) {
			n++
		}
	}
	return n
}

func openOpts(t *testing.T, o pgstate.Options) *pgstate.Store {
	t.Helper()
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	s, err := pgstate.Open(context.Background(), o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Three replicas in leases, 5,000 parallel calls against max_calls = 1000:
// exactly 1,000 forwarded (every client keeps going), each with its allow
// record and outcome, and the chain verifies.
func TestLeasesAcrossReplicasNeverAboveMax(t *testing.T) {
	ctx := context.Background()
	url := migrated(t, pgtest.New(t))
	var rs []*pgstate.Store
	for i := range 3 {
		rs = append(rs, openOpts(t, pgstate.Options{URL: url, Replica: fmt.Sprintf("r%d", i)}))
	}
	const calls, max = 5000, 1000
	var forwarded, exhausted atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 48 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := rs[w%3]
			for next.Add(1) <= calls {
				tk, err := s.Reserve(ctx, ledger.Reservation{Call: call("s", 0), MaxCalls: max})
				switch {
				case errors.Is(err, ledger.ErrExhausted):
					exhausted.Add(1)
					continue
				case err != nil:
					errs <- err
					return
				}
				forwarded.Add(1)
				if err := s.Complete(ctx, tk, ledger.Outcome{OK: true}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if forwarded.Load() != max || exhausted.Load() != calls-max {
		t.Fatalf("forwarded %d, exhausted %d; want %d and %d", forwarded.Load(), exhausted.Load(), max, calls-max)
	}
	for _, s := range rs {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	recs := auditRecords(t, url)
	if n := count(recs, "decision", "allow"); n != max {
		t.Fatalf("%d allow records, want %d", n, max)
	}
	if n := count(recs, "outcome", ""); n != max {
		t.Fatalf("%d outcome records, want %d", n, max)
	}
	leasedCalls := 0
	for _, r := range recs {
		if r["type"] == "decision" && r["ref"] != nil {
			leasedCalls++
		}
	}
	// Leases cover the calls while 200 or more are left.
	if leases := count(recs, "lease", ""); leases == 0 || leasedCalls < 600 {
		t.Fatalf("%d lease records, %d calls inside leases: leases were not used", leases, leasedCalls)
	}
	// Every outcome refers to its call's allow record.
	allow := map[float64]bool{}
	for _, r := range recs {
		if r["type"] == "decision" {
			allow[r["seq"].(float64)] = true
		}
	}
	for _, r := range recs {
		if r["type"] == "outcome" && !allow[r["ref"].(float64)] {
			t.Fatalf("outcome %v refers to no allow record", r["seq"])
		}
	}
	s := open(t, url)
	if p := s.Progress(digest); p.Calls(0) != max {
		t.Fatalf("calls counted after replay: %d", p.Calls(0))
	}
	if _, err := s.Reserve(ctx, ledger.Reservation{Call: call("s", 0), MaxCalls: max}); !errors.Is(err, ledger.ErrExhausted) {
		t.Fatalf("call 1001: %v", err)
	}
}

// A replica's lease is another replica's limit; a lease returned at Close
// gives its calls back; leases off count each call alone.
func TestLeaseReturnedAndNoLeases(t *testing.T) {
	ctx := context.Background()
	url := migrated(t, pgtest.New(t))
	a := openOpts(t, pgstate.Options{URL: url, Replica: "a"})
	b := openOpts(t, pgstate.Options{URL: url, Replica: "b", NoLeases: true})
	const max = 1000
	for range 3 {
		if _, err := a.Reserve(ctx, ledger.Reservation{Call: call("s", 0), MaxCalls: max}); err != nil {
			t.Fatal(err)
		}
	}
	// a took a lease of 10 and used 3: b may count only the rest.
	taken := 0
	for {
		_, err := b.Reserve(ctx, ledger.Reservation{Call: call("s", 0), MaxCalls: max})
		if errors.Is(err, ledger.ErrExhausted) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if taken++; taken > max {
			t.Fatal("b counts beyond max_calls")
		}
	}
	if taken != max-10 {
		t.Fatalf("b forwarded %d; want %d (a's lease of 10 is taken)", taken, max-10)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// a returned its 7 unused calls.
	for range 7 {
		if _, err := b.Reserve(ctx, ledger.Reservation{Call: call("s", 0), MaxCalls: max}); err != nil {
			t.Fatalf("after a's lease was returned: %v", err)
		}
	}
	if _, err := b.Reserve(ctx, ledger.Reservation{Call: call("s", 0), MaxCalls: max}); !errors.Is(err, ledger.ErrExhausted) {
		t.Fatalf("call %d: %v", max+1, err)
	}
	recs := auditRecords(t, url)
	if n := count(recs, "lease", ""); n != 2 {
		t.Fatalf("%d lease records, want the grant and its return", n)
	}
	if n := count(recs, "decision", "allow"); n != max {
		t.Fatalf("%d allow records, want %d", n, max)
	}
}

// TestLeaseHolderProcess is the replica the kill test starts and kills: it
// takes a lease, forwards some calls inside it, says so, and waits.
func TestLeaseHolderProcess(t *testing.T) {
	url := os.Getenv("PGSTATE_LEASE_HOLDER_URL")
	if url == "" {
		t.Skip("started by TestKilledReplicaLeaseSettled")
	}
	ctx := context.Background()
	s, err := pgstate.Open(ctx, pgstate.Options{URL: url, Replica: "doomed", LeaseTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := s.Reserve(ctx, ledger.Reservation{Call: call("s", 0), MaxCalls: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Println("LEASED")
	time.Sleep(time.Minute)
}

// kill -9 of a replica holding a lease: the others never count beyond
// max_calls, the dead lease is settled as used after its expiry, and the
// chain verifies.
func TestKilledReplicaLeaseSettled(t *testing.T) {
	ctx := context.Background()
	url := migrated(t, pgtest.New(t))
	cmd := osexec.Command(os.Args[0], "-test.run=^TestLeaseHolderProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PGSTATE_LEASE_HOLDER_URL="+url)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(out)
	for sc.Scan() && !strings.Contains(sc.Text(), "LEASED") {
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()
	const max = 1000
	s := openOpts(t, pgstate.Options{URL: url, Replica: "survivor", NoLeases: true})
	forwarded := 0
	for {
		_, err := s.Reserve(ctx, ledger.Reservation{Call: call("s", 0), MaxCalls: max})
		if errors.Is(err, ledger.ErrExhausted) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		forwarded++
	}
	// The dead replica took a lease of 10 for calls 1-10 and forwarded 5;
	// the survivor gets the rest, never these 10.
	if forwarded != max-10 {
		t.Fatalf("survivor forwarded %d, want %d", forwarded, max-10)
	}
	// Settled (counted as used) when a transaction runs past its expiry,
	// which may already have happened on this slow machine: either way the
	// survivor never got the dead lease's calls.
	time.Sleep(2100 * time.Millisecond) // past the lease's expiry
	if _, err := s.Reserve(ctx, ledger.Reservation{Call: call("s", 0), MaxCalls: max}); !errors.Is(err, ledger.ErrExhausted) {
		t.Fatalf("after the dead lease's expiry: %v", err)
	}
	recs := auditRecords(t, url)
	var settled map[string]any
	for _, r := range recs {
		if r["type"] == "lease" && r["ref"] != nil {
			settled = r
		}
	}
	if settled == nil || settled["replica"] != "doomed" || !strings.Contains(settled["note"].(string), "count as used") {
		t.Fatalf("no settled lease record: %v", recs[len(recs)-1])
	}
	// The settled calls count: a fresh replica sees max_calls used.
	s2 := open(t, url)
	if p := s2.Progress(digest); p.Calls(0) != max {
		t.Fatalf("calls after the settlement: %d, want %d", p.Calls(0), max)
	}
}

// The database stops: at most the calls of a lease already committed pass,
// then calls are refused; after the restart the lease, whose calls'
// records may be lost, is settled as used, not returned.
func TestLeaseWhileDatabaseDown(t *testing.T) {
	ctx := context.Background()
	cl := pgtest.Start(t)
	url := migrated(t, cl.NewDatabase(t))
	s := openOpts(t, pgstate.Options{URL: url, Timeout: 3 * time.Second, LeaseTTL: 2 * time.Second})
	if _, err := s.Reserve(ctx, ledger.Reservation{Call: call("s", 0), MaxCalls: 1000}); err != nil {
		t.Fatal(err)
	}
	if err := cl.Stop(); err != nil {
		t.Fatal(err)
	}
	passed := 0
	for {
		_, err := s.Reserve(ctx, ledger.Reservation{Call: call("s", 0), MaxCalls: 1000})
		if err != nil {
			if !errors.Is(err, pgstate.ErrUnavailable) {
				t.Fatalf("with the database down: %v", err)
			}
			break
		}
		if passed++; passed > 9 {
			t.Fatal("more calls passed than the lease covers")
		}
		time.Sleep(50 * time.Millisecond) // let the writer try its batch
	}
	if err := cl.StartServer(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2100 * time.Millisecond) // past the lease's expiry
	var err error
	for try := 0; try < 50; try++ {
		if _, err = s.Reserve(ctx, ledger.Reservation{Call: call("s", 0), MaxCalls: 1000}); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	s.Close()
	recs := auditRecords(t, url)
	settled, returned := 0, 0
	for _, r := range recs {
		if r["type"] == "lease" && r["ref"] == 1.0 {
			if strings.Contains(r["note"].(string), "count as used") {
				settled++
			} else {
				returned++
			}
		}
	}
	if settled != 1 || returned != 0 {
		t.Fatalf("the first lease: settled %d, returned %d; want settled once", settled, returned)
	}
	// Every call of the first lease counts: what came after starts at 11.
	if p := open(t, url).Progress(digest); p.Calls(0) < 11 {
		t.Fatalf("calls counted: %d", p.Calls(0))
	}
}
