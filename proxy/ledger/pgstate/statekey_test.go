package pgstate_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/planlock/planlock/internal/testkit/pgtest"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/proxy/ledger/pgstate"
)

func newKey(t *testing.T) *ledger.StateKey {
	t.Helper()
	b := make([]byte, ledger.StateKeySize)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	k, err := ledger.ParseStateKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// firstLease is the seq of the first lease record of replica.
func firstLease(t *testing.T, url, replica string) int64 {
	t.Helper()
	for _, r := range auditRecords(t, url) {
		if r["type"] == "lease" && r["replica"] == replica && r["ref"] == nil {
			return int64(r["seq"].(float64))
		}
	}
	t.Fatalf("no lease record of replica %s", replica)
	return 0
}

// TestStateKeyRefusesForgedRows: with a state key, a row appended by a
// role with exactly the documented rights (an outcome that marks a step
// done, so that an ordered step unlocks; a return of another replica's
// open lease, which would give its calls to a second replica while the
// first still forwards them) stops the running replica, is refused at
// start with an error naming the record, and fails audit verify given the
// key. Without the key, the forged return is taken: up to one lease is
// granted again (the attacker docs/threat-model.md says a keyless state
// does not withstand).
func TestStateKeyRefusesForgedRows(t *testing.T) {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	const max = 1000
	tests := []struct {
		name string
		body func(lease int64) string
	}{
		{"outcome marking step s done", func(int64) string {
			return fmt.Sprintf(`"time":"%s","type":"outcome","plan":"%s","step":"s","step_index":0,"tool":"refund","ref":1,"ok":true,"latency_ms":1`, now, digest)
		}},
		{"return of replica a's open lease", func(lease int64) string {
			return fmt.Sprintf(`"time":"%s","type":"lease","plan":"%s","step":"s","step_index":0,"note":"7 leased calls returned by replica a","ref":%d,"through":10,"replica":"a"`, now, digest, lease)
		}},
	}
	for i, tc := range tests {
		for _, keyed := range []bool{true, false} {
			name := tc.name
			if !keyed {
				name += ", no key"
			}
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				url := migrated(t, pgtest.New(t))
				attacker := documentedRole(t, url, fmt.Sprintf("planlock_mac%d_%v", i, keyed))
				var key *ledger.StateKey
				if keyed {
					key = newKey(t)
				}
				a := openOpts(t, pgstate.Options{URL: url, Replica: "a", StateKey: key})
				b := openOpts(t, pgstate.Options{URL: url, Replica: "b", StateKey: key, NoLeases: true})
				rv := ledger.Reservation{Call: call("s", 0), MaxCalls: max}
				for range 3 {
					if _, err := a.Reserve(ctx, rv); err != nil {
						t.Fatal(err)
					}
				}
				// a holds a lease of 10 and used 3; b's limit is the rest.
				next := ledger.Reservation{Call: call("t", 1), MaxCalls: 1, Check: func(p ledger.Progress) error {
					if !p.Done(0) {
						return errors.New("step s is not done")
					}
					return nil
				}}
				forgeRow(t, attacker, tc.body(firstLease(t, url, "a")))

				if !keyed {
					// As before the key existed: the forged row is taken.
					s := openOpts(t, pgstate.Options{URL: url, Replica: "c", NoLeases: true})
					if i == 0 {
						if _, err := s.Reserve(ctx, next); err != nil {
							t.Fatalf("without a key the forged outcome is not taken: %v", err)
						}
						return
					}
					if got := s.Progress(digest).Calls(0); got != 3 {
						t.Fatalf("without a key, calls taken after the forged return: %d, want 3 (a's 7 unrecorded calls given back)", got)
					}
					return
				}
				if _, err := b.Reserve(ctx, rv); err == nil || !strings.Contains(err.Error(), "has no state MAC") {
					t.Fatalf("the running replica after the forged row: %v, want it refused for the missing MAC", err)
				}
				if _, err := b.Reserve(ctx, next); err == nil {
					t.Fatal("the running replica unlocked the ordered step")
				}
				_, _, verr := pgstate.VerifyWith(ctx, url, key)
				s, oerr := pgstate.Open(ctx, pgstate.Options{URL: url, StateKey: key, Timeout: 3 * time.Second})
				if oerr == nil {
					s.Close()
					t.Fatal("a replica started on the forged row")
				}
				t.Logf("start: %v", oerr)
				t.Logf("verify: %v", verr)
				for _, err := range []error{oerr, verr} {
					if err == nil || !strings.Contains(err.Error(), "record 6 has no state MAC") || strings.Contains(err.Error(), "\n") {
						t.Fatalf("start / verify: %v, want one line naming record 6", err)
					}
				}
				if !errors.Is(oerr, ledger.ErrCorrupt) {
					t.Fatalf("start: %v, want ErrCorrupt", oerr)
				}
			})
		}
	}
}

// TestStateKeyOnSharedState: a replica without the key, or with another
// one, does not start on a keyed state; a state written before the key is
// taken only when told, and a replica that introduces the key writes the
// state_key record.
func TestStateKeyOnSharedState(t *testing.T) {
	ctx := context.Background()
	url := migrated(t, pgtest.New(t))
	key := newKey(t)
	plain := openOpts(t, pgstate.Options{URL: url, Replica: "plain", NoLeases: true})
	if _, err := plain.Reserve(ctx, ledger.Reservation{Call: call("s", 0), MaxCalls: 5}); err != nil {
		t.Fatal(err)
	}
	if err := plain.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err := pgstate.Open(ctx, pgstate.Options{URL: url, StateKey: key}); err == nil {
		s.Close()
		t.Fatal("a keyed replica took an unkeyed state without being told")
	} else if !errors.Is(err, ledger.ErrUnkeyed) || !strings.Contains(err.Error(), "--accept-unkeyed-state") {
		t.Fatalf("open: %v", err)
	}
	s := openOpts(t, pgstate.Options{URL: url, StateKey: key, AcceptUnkeyedState: true, NoLeases: true})
	if got := s.Progress(digest).Calls(0); got != 1 {
		t.Fatalf("calls after the key was introduced: %d, want 1", got)
	}
	recs := auditRecords(t, url)
	if last := recs[len(recs)-1]; last["type"] != "state_key" || last["mac"] == nil {
		t.Fatalf("last record %v, want the state_key record with a MAC", last)
	}
	if _, _, err := pgstate.VerifyWith(ctx, url, key); err != nil {
		t.Fatalf("verify with the key: %v", err)
	}
	for _, o := range []pgstate.Options{{URL: url}, {URL: url, StateKey: newKey(t)}} {
		if r, err := pgstate.Open(ctx, o); err == nil {
			r.Close()
			t.Fatalf("a replica with key %v started on a keyed state", o.StateKey != nil)
		} else if !strings.Contains(err.Error(), "state MAC") {
			t.Fatalf("open: %v", err)
		}
	}
}
