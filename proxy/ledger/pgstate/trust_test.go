package pgstate_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/planlock/planlock/internal/testkit/pgtest"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/proxy/ledger/pgstate"
)

// documentedRole creates a role with exactly the rights docs/scale-out.md
// lists for planlock, and returns the URL that connects as it.
func documentedRole(t *testing.T, url, name string) string {
	t.Helper()
	if err := exec(t, url, fmt.Sprintf(`CREATE ROLE %[1]s LOGIN;
		GRANT INSERT, SELECT ON planlock_audit TO %[1]s;
		GRANT SELECT, UPDATE ON planlock_head TO %[1]s`, name)); err != nil {
		t.Fatal(err)
	}
	return strings.Replace(url, "postgres://postgres@", "postgres://"+name+"@", 1)
}

// forgeRow appends one record with body (the fields between the chain
// header and the hash) as that role can: chained to the head, the head
// moved to it. No key is needed for any of it.
func forgeRow(t *testing.T, url, body string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var seq int64
		var head string
		if err := tx.QueryRow(ctx, "SELECT seq, hash FROM planlock_head FOR UPDATE").Scan(&seq, &head); err != nil {
			return err
		}
		line := fmt.Sprintf(`{"seq":%d,"prev":"%s",%s`, seq+1, head, body)
		sum := sha256.Sum256([]byte(line))
		hash := hex.EncodeToString(sum[:])
		line += `,"hash":"` + hash + `"}`
		if _, err := tx.Exec(ctx, "INSERT INTO planlock_audit (seq, line) VALUES ($1, $2)", seq+1, line); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "UPDATE planlock_head SET seq = $1, hash = $2", seq+1, hash)
		return err
	})
	if err != nil {
		t.Fatalf("forge a record as the documented role: %v", err)
	}
}

// TestDocumentedRoleCannotWiden: a database role with exactly the rights
// planlock's role has appends one chained record that would widen what may
// be forwarded. No replica takes it: a segment or checkpoint record with a
// state the records before it do not give stops every replica (running or
// starting) and fails audit verify --state; an approval appended without a
// signed approval approves nothing.
func TestDocumentedRoleCannotWiden(t *testing.T) {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	// The state after max_calls 1 of step s was used, with the count at 0.
	state := `{"plans":{"` + digest + `":{"current":0,"used":[0],"done":[false],"held":[false],"names":["s"]}},"holds":[],"newest":{}}`
	sum := sha256.Sum256([]byte(state))
	stateSHA := hex.EncodeToString(sum[:])
	tests := []struct {
		name    string
		body    func(hold string) string
		refused string // "" when start and verify succeed
		spent   bool   // the hold was approved and consumed before
	}{
		{"segment record with an empty state", func(string) string {
			return fmt.Sprintf(`"time":"%s","type":"segment","state_sha256":"%s","prev_segment":"audit.x.jsonl","state":%s`, now, stateSHA, state)
		}, "segment record", false},
		{"checkpoint record vouching for a state with the count at 0", func(string) string {
			return fmt.Sprintf(`"time":"%s","type":"checkpoint","state_sha256":"%s"`, now, stateSHA)
		}, "vouches for a state that the records before it do not give", false},
		{"hold_update approving a pending hold", func(hold string) string {
			return fmt.Sprintf(`"time":"%s","type":"hold_update","plan":"%s","step":"s","tool":"refund","hold":"%s","hold_state":"approved","note":"approval verified"`, now, digest, hold)
		}, "", false},
		{"hold_update approving a consumed hold again", func(hold string) string {
			return fmt.Sprintf(`"time":"%s","type":"hold_update","plan":"%s","step":"s","tool":"refund","hold":"%s","hold_state":"approved","note":"approval verified"`, now, digest, hold)
		}, "which planlock never writes", true},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			url := migrated(t, pgtest.New(t))
			attacker := documentedRole(t, url, fmt.Sprintf("planlock_app%d", i))
			running := open(t, url)
			rv := ledger.Reservation{Call: call("s", 0), MaxCalls: 1}
			if _, err := running.Reserve(ctx, rv); err != nil {
				t.Fatal(err)
			}
			h, err := running.NewHold(ctx, call("s", 0), ledger.HoldSpec{Reason: "over", Expires: time.Now().Add(time.Hour)})
			if err != nil {
				t.Fatal(err)
			}

			hold := ledger.Reservation{Call: call("s", 0), MaxCalls: 1, HoldID: h.ID, OverLimit: true}
			if tc.spent {
				if _, err := running.UpdateHold(ctx, h.ID, ledger.HoldUpdate{State: ledger.HoldApproved}); err != nil {
					t.Fatal(err)
				}
				if _, err := running.Reserve(ctx, hold); err != nil {
					t.Fatal(err)
				}
			}

			forgeRow(t, attacker, tc.body(h.ID))

			// The running replica reads the record with its next change.
			if _, err := running.Reserve(ctx, rv); err == nil {
				t.Fatal("the running replica granted a second call of max_calls 1")
			}
			if _, err := running.Reserve(ctx, hold); err == nil {
				t.Fatal("the running replica consumed a hold nobody approved")
			}
			_, _, verr := pgstate.Verify(ctx, url)
			s, oerr := pgstate.Open(ctx, pgstate.Options{URL: url, Timeout: 3 * time.Second})
			if tc.refused != "" {
				if oerr == nil {
					s.Close()
					t.Fatal("a replica started on the forged record")
				}
				for _, err := range []error{oerr, verr} {
					if !errors.Is(err, ledger.ErrCorrupt) || !strings.Contains(err.Error(), tc.refused) {
						t.Fatalf("start / verify: %v, want ErrCorrupt with %q", err, tc.refused)
					}
				}
				return
			}
			if oerr != nil || verr != nil {
				t.Fatalf("start %v, verify %v", oerr, verr)
			}
			defer s.Close()
			if got, _ := s.FindHold(call("s", 0)); got.State != ledger.HoldPending {
				t.Fatalf("a starting replica reads the forged approval as %s, want pending", got.State)
			}
			if _, err := s.Reserve(ctx, hold); !errors.Is(err, ledger.ErrHoldState) {
				t.Fatalf("a starting replica consumes the forged approval: %v", err)
			}
		})
	}
}
