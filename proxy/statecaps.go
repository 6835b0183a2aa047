package proxy

import (
	"context"
	"fmt"

	"github.com/planlock/planlock/proxy/ledger"
)

// The optional capabilities of a State, beside it. A state that lacks one
// loses the feature by name, never silently: New refuses a configuration
// that needs a capability the state does not have (observe mode, a plan
// with input rules), and the fast paths fall back to the plain road.
// *ledger.Ledger has every one; pgstate's Store has InputRecorder and
// Observer.

// InputRecorder is what multi-round calls need of the state.
type InputRecorder interface {
	// Input records the answers of one round of a multi-round call, once:
	// a round answered before (on any replica) is ledger.ErrRoundAnswered.
	Input(ctx context.Context, c ledger.Call, ref uint64, round int, what string) error
}

// Observer is what observe mode needs of the state.
type Observer interface {
	// Observe records what the plan would have decided for a call that
	// observe mode forwards uncounted.
	Observe(ctx context.Context, c ledger.Call, decision, reason string) error
}

// LaterCompleter lets a success be answered before its outcome record is
// written: CompleteLater counts the outcome at once and returns the write.
// Without it the outcome is recorded before the answer.
type LaterCompleter interface {
	CompleteLater(ctx context.Context, t ledger.Ticket, o ledger.Outcome) (write func(), err error)
}

// DiskWaiter tells the stdio fast lane whether a reservation would wait for
// the disk, so that concurrent calls share one fdatasync on a worker.
// Without it every reservation is taken on the reader.
type DiskWaiter interface {
	WaitsForDisk(rv ledger.Reservation) bool
}

// localStater marks a state in this process's memory, whose calls no
// other goroutine waits on (a test's wrapper of a Ledger).
type localStater interface{ localState() }

// checkCapabilities refuses a configuration whose plan needs a capability
// the state lacks, at start, with the reason (observe mode is checkObserve's).
func checkCapabilities(cfg Config) error {
	if _, ok := cfg.State.(InputRecorder); !ok && hasInputRules(cfg.Plan) {
		return fmt.Errorf("plan %q has input rules (multi-round calls), but the state (%T) does not record their answers (proxy.InputRecorder)", cfg.Plan.Name, cfg.State)
	}
	return nil
}
