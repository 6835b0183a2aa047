package planrun

import (
	"context"
	"fmt"
	"sync"

	"github.com/planlock/planlock/internal/approvals"
	"github.com/planlock/planlock/internal/statedir"
	"github.com/planlock/planlock/proxy"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/proxy/ledger/pgstate"
	"github.com/planlock/planlock/proxy/planload"
)

// State is what a running gate needs of its state: a state directory
// (*ledger.Ledger) or a PostgreSQL database shared by replicas.
type State interface {
	proxy.State
	proxy.Observer
	planload.Admitter
	approvals.Store
	// Dir holds the gate's local files (hold request files, the Git cache).
	Dir() string
	Close() error
}

// Faulter is a State that reports a disk fault (the state directory's
// ledger); calls are refused while Fault is not nil.
type Faulter interface{ Fault() error }

// StateOptions say which state a gate keeps its counts in.
type StateOptions struct {
	// State is a postgres:// URL, a state directory, or "" for the
	// plan's directory under Root (internal/statedir).
	State string
	// Root holds one directory per signed path and trust policy; with a
	// PostgreSQL state it keeps the plan's local files only.
	Root string
	// Ledger are the options of a state directory's ledger (Dir is set
	// here); Redact, SyncEachCall (no leases), StateKey and
	// AcceptUnkeyedState also apply to PostgreSQL.
	Ledger ledger.Options
	// Key, when set, reads the state key, refusing a key file in any of
	// dirs (the state directory and the root); else Ledger.StateKey is it.
	Key func(dirs ...string) (*ledger.StateKey, error)
	// LocalDir, when set, is told the plan's directory once it is known,
	// also when the state then fails to open (for a log file there).
	LocalDir func(dir string)
	// Log gets one line for a migration notice and the database used.
	Log func(string)
}

// IsPostgres reports whether state names a PostgreSQL state.
func IsPostgres(state string) bool { return pgstate.IsURL(state) }

// pgStore is a PostgreSQL state with a local directory for the files a
// gate keeps besides its state. A database may hold several plans' state
// (planlock serve's plans, or proxies of different plans, with one
// --state URL): counts and holds are kept by plan digest, and what lists
// the holds (the sweep of expired hold pull requests, the pending-holds
// gauge) sees only those of the plan versions this gate served, as a
// state directory (one per signed path) holds only its plan's.
type pgStore struct {
	*pgstate.Store
	dir   string
	scope *digestScope
}

func (p pgStore) Dir() string { return p.dir }

// ListHolds returns this gate's plans' holds in creation order.
func (p pgStore) ListHolds() []ledger.Hold {
	all := p.Store.ListHolds()
	own := all[:0:0]
	for _, h := range all {
		if p.scope.has(h.PlanDigest) {
			own = append(own, h)
		}
	}
	return own
}

// digestScope is the set of plan digests a gate served.
type digestScope struct {
	mu      sync.Mutex
	digests map[string]bool
}

func newDigestScope(digest string) *digestScope {
	return &digestScope{digests: map[string]bool{digest: true}}
}

func (d *digestScope) add(digest string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.digests[digest] = true
}

func (d *digestScope) has(digest string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.digests[digest]
}

func (o *StateOptions) log(s string) {
	if o.Log != nil {
		o.Log(s)
	}
}

func (o *StateOptions) key(dirs ...string) (*ledger.StateKey, error) {
	if o.Key == nil {
		return o.Ledger.StateKey, nil
	}
	return o.Key(dirs...)
}

// planDir is the plan's directory under the root: one per signed path and
// trust policy, never per plan label (a directory the earlier layout kept
// per label is migrated once).
func (o *StateOptions) planDir(ctx context.Context, l *planload.Loaded) (*statedir.Dir, error) {
	d, err := statedir.Prepare(ctx, statedir.Options{Root: o.Root, ID: l.Identity(), Label: l.Plan.Name, Log: o.Log})
	if err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	if o.LocalDir != nil {
		o.LocalDir(d.Path)
	}
	return d, nil
}

// OpenState opens the loaded plan's state. Errors are one line.
func OpenState(ctx context.Context, loaded *planload.Loaded, o StateOptions) (State, error) {
	st, _, err := openState(ctx, loaded, o)
	return st, err
}

// openState is OpenState, also returning the state key (nil: none).
func openState(ctx context.Context, loaded *planload.Loaded, o StateOptions) (State, *ledger.StateKey, error) {
	if IsPostgres(o.State) {
		return openPostgres(ctx, loaded, o)
	}
	stateDir := o.State
	var prepared *statedir.Dir
	if stateDir == "" {
		d, err := o.planDir(ctx, loaded)
		if err != nil {
			return nil, nil, err
		}
		prepared, stateDir = d, d.Path
	}
	dirs := []string{stateDir}
	if prepared != nil {
		dirs = append(dirs, o.Root) // the key must not be under the state root either
	}
	key, err := o.key(dirs...)
	if err != nil {
		return nil, nil, err
	}
	lo := o.Ledger
	lo.Dir, lo.StateKey = stateDir, key
	l, err := ledger.Open(ctx, lo)
	if err != nil {
		return nil, nil, err
	}
	if prepared != nil {
		if err := prepared.Carry(ctx, l); err != nil {
			l.Close()
			return nil, nil, err
		}
	}
	return l, key, nil
}

// openPostgres opens a PostgreSQL state; hold request files and the Git
// cache stay on this machine, in the plan's directory under the root.
func openPostgres(ctx context.Context, loaded *planload.Loaded, o StateOptions) (State, *ledger.StateKey, error) {
	d, err := o.planDir(ctx, loaded)
	if err != nil {
		return nil, nil, err
	}
	key, err := o.key(d.Path)
	if err != nil {
		return nil, nil, err
	}
	// SyncEachCall: every call in its own transaction, no leases.
	s, err := pgstate.Open(ctx, pgstate.Options{URL: o.State, Redact: o.Ledger.Redact, NoLeases: o.Ledger.SyncEachCall,
		StateKey: key, AcceptUnkeyedState: o.Ledger.AcceptUnkeyedState})
	if err != nil {
		return nil, nil, err
	}
	o.log("planlock: state in " + s.Where())
	if err := d.Carry(ctx, s); err != nil {
		s.Close()
		return nil, nil, err
	}
	return pgStore{Store: s, dir: d.Path, scope: newDigestScope(loaded.Plan.Digest)}, key, nil
}
