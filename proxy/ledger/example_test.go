package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/planlock/planlock/proxy/ledger"
)

// The gate's use of the ledger for one tools/call that passed the plan's
// checks up to max_calls.
func Example() {
	dir, _ := os.MkdirTemp("", "planlock-state")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	l, err := ledger.Open(ctx, ledger.Options{Dir: dir})
	if err != nil {
		fmt.Println(err) // e.g. another proxy holds the directory
		return
	}
	defer l.Close()

	c := ledger.Call{
		PlanDigest: "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Step:       "refund", StepIndex: 1, Tool: "refund_customer",
		Args: json.RawMessage(`{"order_id":"4711","amount":30,"currency":"EUR"}`),
	}
	for i := 0; i < 2; i++ {
		t, err := l.Reserve(ctx, ledger.Reservation{
			Call: c, MaxCalls: 1,
			// The sequential-order rule, atomic with the count.
			Check: func(p ledger.Progress) error {
				if c.StepIndex < p.Current {
					return errors.New("step refund is closed")
				}
				return nil
			},
		})
		var ex *ledger.ExhaustedError
		if errors.As(err, &ex) {
			// Not forwarded: answer isError and record the block.
			fmt.Println("blocked:", err)
			_ = l.Block(ctx, c, err.Error())
			continue
		}
		if err != nil {
			fmt.Println("not forwarded:", err)
			continue
		}
		// Durable: forward the call now, then record the outcome.
		fmt.Println("forwarded, call", t.Used)
		_ = l.Complete(ctx, t, ledger.Outcome{OK: true, Latency: 80 * time.Millisecond})
	}
	fmt.Println("step done:", l.Progress(c.PlanDigest).Done(1))
	// Output:
	// forwarded, call 1
	// blocked: step "refund": max_calls 1 used up (1 calls forwarded)
	// step done: true
}
