package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/planlock/planlock/internal/planrun"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/proxy/ledger/pgstate"
)

// proxyStateOptions are the state options of the proxy's gate
// (internal/planrun): --state (a postgres:// URL or a directory), else the
// loaded plan's directory under the state root. onSync (telemetry) gets
// each journal fdatasync's duration, onWritable (telemetry, may be nil)
// each change of a disk fault.
func (o *proxyOptions) proxyStateOptions(onSync func(time.Duration), onWritable func(bool)) (planrun.StateOptions, error) {
	root, err := o.root()
	if err != nil && (o.State == "" || pgstate.IsURL(o.State)) {
		return planrun.StateOptions{}, err // needed for the plan's directory
	}
	so := planrun.StateOptions{State: o.State, Root: root, Key: o.key, Log: o.errw,
		LocalDir: func(d string) { o.localDir = d }}
	if pgstate.IsURL(o.State) && o.given("audit") {
		return so, usageErrorf("--audit applies to a state directory, not to --state postgres://...: the database holds the audit chain")
	}
	so.Ledger = ledger.Options{AuditPath: o.Audit, Redact: o.AuditRedact, OnSync: onSync,
		SyncEachCall:       o.SyncEachCall,
		AcceptUnkeyedState: o.AcceptUnkeyedState,
		// One stdio client waits for each record anyway; a listener's
		// sessions share the process's Ps.
		RawAppends: o.Listen == "",
		// One line per checkpoint, rotation and at shutdown, for a log
		// shipper to keep: planlock audit verify --anchor reads it back.
		OnHead: func(h ledger.Head) { o.errw("planlock: audit head " + h.String()) },
		// A disk fault (ENOSPC, EIO, EROFS): calls are refused until the
		// ledger takes the journal up again by itself; said once each way.
		OnFault: func(err error) {
			if err != nil {
				o.errw("planlock: state fault: " + err.Error())
			} else {
				o.errw("planlock: state writable again; calls are served")
			}
			if onWritable != nil {
				onWritable(err == nil)
			}
		}}
	if err := o.fileStateOptions.apply(&so.Ledger, pgstate.IsURL(o.State), o.given); err != nil {
		return so, err
	}
	return so, nil
}

func stateCommand() *cli.Command {
	return &cli.Command{
		Name:  "state",
		Usage: "set up and move the proxy's state (PostgreSQL for several replicas)",
		Subcommands: []*cli.Command{
			stateMigrateCommand(),
			stateCopyCommand(),
		},
	}
}

// stateMigrateOptions are the flags of planlock state migrate.
type stateMigrateOptions struct {
	cmdline
	State string
}

func (o *stateMigrateOptions) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "state", Usage: "the PostgreSQL `URL` (postgres://USER@HOST/DB; a password is better in PGPASSWORD or ~/.pgpass)", Required: true, Destination: &o.State},
	}
}

func stateMigrateCommand() *cli.Command {
	o := &stateMigrateOptions{}
	return &cli.Command{
		Name:  "migrate",
		Usage: "create or upgrade the planlock schema of a PostgreSQL state",
		Description: `Brings the planlock tables of the database named by --state to the
schema this planlock knows. Run it once before the first proxy starts on
the database and after each upgrade of planlock; proxies refuse a database
that is not migrated, or that a newer planlock migrated. Concurrent runs
take turns.

Examples:
   planlock state migrate --state postgres://planlock@db.example/planlock

Exit status: 0 when the schema is current, 1 otherwise.`,
		Flags:  o.flags(),
		Action: action(o, runStateMigrate),
	}
}

func runStateMigrate(ctx context.Context, o *stateMigrateOptions) error {
	if len(o.Args) != 0 {
		return usageErrorf("state migrate: unexpected argument %q", o.Args[0])
	}
	if !pgstate.IsURL(o.State) {
		return usageErrorf("state migrate: --state must be a postgres:// URL (a state directory needs no migration)")
	}
	from, to, err := pgstate.Migrate(ctx, o.State)
	if err != nil {
		return failf("state migrate: %v", err)
	}
	if from == to {
		fmt.Fprintf(o.IO.out, "%s: schema version %d, current\n", pgstate.Describe(o.State), to)
	} else {
		fmt.Fprintf(o.IO.out, "%s: schema version %d -> %d\n", pgstate.Describe(o.State), from, to)
	}
	return nil
}

// stateCopyOptions are the flags of planlock state copy.
type stateCopyOptions struct {
	cmdline
	From      string
	FromAudit string
	To        string
	StateKey  string
}

func (o *stateCopyOptions) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "from", Usage: "the state `DIR` to copy", Required: true, TakesFile: true, Destination: &o.From},
		&cli.StringFlag{Name: "from-audit", Usage: "its audit log `FILE`, when not <DIR>/audit.jsonl", TakesFile: true, Destination: &o.FromAudit},
		&cli.StringFlag{Name: "to", Usage: "the PostgreSQL `URL` (migrated, no records)", Required: true, Destination: &o.To},
		&cli.StringFlag{Name: "state-key", Usage: "the state key `FILE` of a state kept with one (the records are copied with their MACs)", TakesFile: true, Destination: &o.StateKey},
	}
}

func stateCopyCommand() *cli.Command {
	o := &stateCopyOptions{}
	return &cli.Command{
		Name:  "copy",
		Usage: "move a state directory into a PostgreSQL state, counts unchanged",
		Description: `Copies the audit journal of a state directory, record for record, into a
migrated PostgreSQL database that has no records yet; the derived state
(calls counted per step, order progress, holds, no-downgrade marks) is
compared before and after and must be the same. The proxy on the directory
must be stopped: the directory is opened (its lock taken, its anchor
checked, leases a crash left open counted as used) and closed first.

Examples:
   planlock state copy --from ~/.local/state/planlock/refund.hcl-3f9a0c41d2b7e655 --to postgres://planlock@db.example/planlock

Exit status: 0 when the copy has the same state, 1 otherwise.`,
		Flags:  o.flags(),
		Action: action(o, runStateCopy),
	}
}

func runStateCopy(ctx context.Context, o *stateCopyOptions) error {
	if len(o.Args) != 0 {
		return usageErrorf("state copy: unexpected argument %q", o.Args[0])
	}
	if !pgstate.IsURL(o.To) {
		return usageErrorf("state copy: --to must be a postgres:// URL")
	}
	lo := ledger.Options{Dir: o.From, AuditPath: o.FromAudit}
	if o.StateKey != "" {
		k, err := ledger.ReadStateKey(o.StateKey, o.From)
		if err != nil {
			return failf("state copy: --state-key: %v", err)
		}
		lo.StateKey = k
	}
	before, journal, err := settledJournal(ctx, lo)
	if err != nil {
		return failf("state copy: %v", err)
	}
	head, after, err := pgstate.Import(ctx, o.To, journal)
	if err != nil {
		return failf("state copy: %v", err)
	}
	if after != before {
		return failf("state copy: the state read back from %s (%s) differs from %s's (%s)", pgstate.Describe(o.To), after, o.From, before)
	}
	fmt.Fprintf(o.IO.out, "copied %s into %s\nhead: %s\nstate: sha256 %s, the same before and after\n",
		plural(int(head.Seq), "record", "records"), pgstate.Describe(o.To), head, after)
	return nil
}

// settledJournal opens and closes a state directory (so that it is not in
// use, its anchor holds and no lease is open), then returns its state's
// digest and its journal's bytes.
func settledJournal(ctx context.Context, o ledger.Options) (string, []byte, error) {
	l, err := ledger.Open(ctx, o)
	if err != nil {
		return "", nil, err
	}
	audit := l.AuditPath()
	if err := l.Close(); err != nil {
		return "", nil, err
	}
	snap, err := ledger.Inspect(ctx, ledger.Options{Dir: o.Dir, AuditPath: audit})
	if err != nil {
		return "", nil, err
	}
	digest, err := snap.StateDigest()
	if err != nil {
		return "", nil, err
	}
	data, err := os.ReadFile(audit)
	if err != nil {
		return "", nil, err
	}
	return digest, data, nil
}

// pgJournal is the journal of a PostgreSQL state for audit verify and
// audit head: its bytes as a file would hold them, and its head row.
func pgJournal(ctx context.Context, url string) (io.ReadSeeker, ledger.Head, error) {
	data, head, err := pgstate.Journal(ctx, url)
	if err != nil {
		return nil, head, err
	}
	return bytes.NewReader(data), head, nil
}

// pgSnapshot is a PostgreSQL state as of now, for planlock holds list and show.
func pgSnapshot(ctx context.Context, url string) (*ledger.Snapshot, error) {
	data, head, err := pgstate.Journal(ctx, url)
	if err != nil {
		return nil, err
	}
	m := ledger.NewMachine(false)
	if err := ledger.JournalLines(data, m.Apply); err != nil {
		return nil, fmt.Errorf("%s: %w", pgstate.Describe(url), err)
	}
	if m.Head() != head {
		return nil, fmt.Errorf("%w: %s: the journal ends at %s, its head row says %s", ledger.ErrAnchor, pgstate.Describe(url), m.Head(), head)
	}
	return m.Snapshot(pgstate.Describe(url), time.Now()), nil
}
