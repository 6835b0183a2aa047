package pgstate_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/planlock/planlock/internal/testkit/pgtest"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/proxy/ledger/ledgertest"
	"github.com/planlock/planlock/proxy/ledger/pgstate"
)

// pgBackend is a database for the conformance suite.
type pgBackend struct {
	url  string
	opts pgstate.Options
}

func (b *pgBackend) Open(t *testing.T, now func() time.Time) ledgertest.State {
	t.Helper()
	o := b.opts
	o.URL, o.Now = b.url, now
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	s, err := pgstate.Open(context.Background(), o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

func (b *pgBackend) Crash(t *testing.T, s ledgertest.State) { pgstate.Crash(s.(*pgstate.Store)) }

func (b *pgBackend) Journal(t *testing.T) []byte {
	t.Helper()
	data, _, err := pgstate.Journal(context.Background(), b.url)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func (b *pgBackend) Leases() bool { return !b.opts.NoLeases }

func (b *pgBackend) LeaseTTL() time.Duration {
	if b.opts.LeaseTTL > 0 {
		return b.opts.LeaseTTL
	}
	return 10 * time.Second
}

// TestConformance runs the backend conformance suite against PostgreSQL,
// as it is configured in use.
func TestConformance(t *testing.T) {
	for name, o := range map[string]func(t *testing.T) pgstate.Options{
		"default":   func(*testing.T) pgstate.Options { return pgstate.Options{} },
		"no_leases": func(*testing.T) pgstate.Options { return pgstate.Options{NoLeases: true} },
		"state_key": func(t *testing.T) pgstate.Options {
			k, err := ledger.ParseStateKey([]byte(strings.Repeat("0123456789abcdef", 4)))
			if err != nil {
				t.Fatal(err)
			}
			return pgstate.Options{StateKey: k}
		},
	} {
		t.Run(name, func(t *testing.T) {
			ledgertest.TestBackend(t, func(t *testing.T) ledgertest.Backend {
				return &pgBackend{url: migrated(t, pgtest.New(t)), opts: o(t)}
			})
		})
	}
}
