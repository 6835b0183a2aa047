package ledger_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/proxy/ledger/ledgertest"
)

// fileBackend is a state directory for the conformance suite.
type fileBackend struct {
	dir   string
	opts  ledger.Options
	audit string
}

func (b *fileBackend) Open(t *testing.T, now func() time.Time) ledgertest.State {
	t.Helper()
	o := b.opts
	o.Dir, o.Now = b.dir, now
	l, err := ledger.Open(context.Background(), o)
	if err != nil {
		t.Fatalf("open %s: %v", b.dir, err)
	}
	b.audit = l.AuditPath()
	return l
}

func (b *fileBackend) Crash(t *testing.T, s ledgertest.State) {
	t.Helper()
	l := s.(*ledger.Ledger)
	b.dir = ledger.CrashCopy(t, l)
	l.Close() // writes to the original only
}

func (b *fileBackend) Journal(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(b.audit)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func (b *fileBackend) Leases() bool { return !b.opts.SyncEachCall }

func (b *fileBackend) LeaseTTL() time.Duration { return 0 }

// conformanceKey is a state key for the keyed runs.
func conformanceKey(t *testing.T) *ledger.StateKey {
	t.Helper()
	k, err := ledger.ParseStateKey([]byte(strings.Repeat("0123456789abcdef", 4)))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestConformance runs the backend conformance suite against the file
// ledger, as it is configured in use.
func TestConformance(t *testing.T) {
	for name, o := range map[string]func(t *testing.T) ledger.Options{
		"default":        func(*testing.T) ledger.Options { return ledger.Options{} },
		"sync_each_call": func(*testing.T) ledger.Options { return ledger.Options{SyncEachCall: true} },
		"state_key":      func(t *testing.T) ledger.Options { return ledger.Options{StateKey: conformanceKey(t)} },
		"raw_appends":    func(*testing.T) ledger.Options { return ledger.Options{RawAppends: true} },
	} {
		t.Run(name, func(t *testing.T) {
			ledgertest.TestBackend(t, func(t *testing.T) ledgertest.Backend {
				return &fileBackend{dir: t.TempDir(), opts: o(t)}
			})
		})
	}
}
