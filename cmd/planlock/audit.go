package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/planlock/planlock/internal/boundedio"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/proxy/ledger/pgstate"
	"github.com/urfave/cli/v2"
)

func auditCommand() *cli.Command {
	return &cli.Command{
		Name:  "audit",
		Usage: "check the proxy's audit log",
		Subcommands: []*cli.Command{
			auditVerifyCommand(),
			auditHeadCommand(),
			auditExportCommand(), // audit_series.go
		},
	}
}

func auditVerifyCommand() *cli.Command {
	o := &auditVerifyOptions{}
	return &cli.Command{
		Name:      "verify",
		Usage:     "check the hash chain of an audit log",
		ArgsUsage: "FILE...|DIR",
		Description: `Checks that every record of the audit log (JSON Lines, as written by
planlock proxy) still has its own hash, its sequence number and the hash of
the record before it. An edited, removed, inserted or reordered record is
reported with the number of the first bad line. A last line cut short by a
crash is reported as torn (the proxy truncates it when it next starts).
With --state postgres://... the chain kept in that database is checked the
same way, and must end at the database's head row.

A log the proxy rotated (--audit-rotate-size, --audit-rotate-every) is a
series of files: archived segments named <log>.<first seq>-<last seq>.jsonl
and the log itself, each new file starting with a segment record that
continues the chain of the file before it. Give the files oldest first, or
their directory: they are checked as one chain, and a missing, reordered,
truncated or edited file is named. A series may start at a later segment
(older ones archived away); the output says from which seq.

On success it prints the number of records and the head: the hash of the
last record. Nothing inside the log protects its last records: removing them
leaves a shorter log whose chain still holds. Compare it with a head kept
elsewhere (see planlock audit head):

  --anchor FILE  a head copied out earlier: the output of "audit head",
                 a "seq=N hash=H" line of the proxy's log, or a copy of the
                 state directory's head file. The log must still have record N
                 with hash H; a shorter log is reported as truncated.
  --head HASH    a record hash kept earlier: the log must still contain it.

Examples:
   planlock audit verify ~/.local/state/planlock/audit.jsonl
   planlock audit verify --anchor shipped-head.txt audit.jsonl
   planlock audit verify --head 0f13b09a...7ae4 --json audit.jsonl
   planlock audit verify --anchor /var/lib/planlock/refund-4711/head /var/lib/planlock/refund-4711/
   planlock audit verify --state postgres://planlock@db.example/planlock

Exit status: 0 when the chain holds (and matches the head given), 1 otherwise.`,
		Flags:  o.flags(),
		Action: action(o, runAuditVerify),
	}
}

// auditVerifyOptions are the flags of planlock audit verify.
type auditVerifyOptions struct {
	cmdline
	JSON         bool
	State        string
	Anchor       string
	Head         string
	MaxLineBytes int64
	StateKey     string
}

func (o *auditVerifyOptions) flags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "json", Usage: "print the result as JSON on standard output", Destination: &o.JSON},
		&cli.StringFlag{Name: "state", Usage: "verify the chain of a PostgreSQL state (postgres:// `URL`) instead of a FILE; it must also end at the database's head row", Destination: &o.State},
		&cli.StringFlag{Name: "anchor", Usage: "a head kept elsewhere (`FILE` with a seq=N hash=H line): the log must still reach it", TakesFile: true, Destination: &o.Anchor},
		&cli.StringFlag{Name: "head", Usage: "a record `HASH` kept elsewhere: the log must still contain it", Destination: &o.Head},
		&cli.StringFlag{Name: "state-key", Usage: "also check every record's MAC under the state key in `FILE` (the proxy's --state-key); without it only the chain is checked", TakesFile: true, Destination: &o.StateKey},
		&cli.Int64Flag{Name: "max-line-bytes", Value: boundedio.MaxLineBytes, Usage: "refuse a record longer than `N` bytes (raise it for a log written with a larger --max-message-bytes)", Destination: &o.MaxLineBytes},
	}
}

func runAuditVerify(ctx context.Context, o *auditVerifyOptions) error {
	pgURL := o.State
	if !pgstate.IsURL(pgURL) || len(o.Args) > 0 {
		pgURL = "" // files given, or a state directory: its journal is the FILE argument
	}
	if len(o.Args) == 0 && pgURL == "" {
		return usageErrorf("audit verify: give the audit log file, its segments, or their directory, or --state postgres://... and no file")
	}
	wantHash := o.Head
	if o.given("head") && !isHexHash(wantHash) {
		return usageErrorf("audit verify: --head %q is not a record hash (64 lowercase hex digits)", wantHash)
	}
	var anchor *ledger.Head
	if p := o.Anchor; p != "" {
		h, err := readHeadFile(p)
		if err != nil {
			return failf("audit verify: --anchor %s: %v", p, err)
		}
		anchor = &h
	}
	max := o.MaxLineBytes
	if max <= 0 {
		return usageErrorf("audit verify: --max-line-bytes must be positive")
	}
	var key *ledger.StateKey
	if o.StateKey != "" {
		var err error
		if key, err = ledger.ReadStateKey(o.StateKey); err != nil {
			return failf("audit verify: --state-key: %v", err)
		}
	}
	var (
		path    string
		f       io.ReadSeeker
		file    *os.File     // f, when it is a file
		rowHead *ledger.Head // a PostgreSQL state's head row
	)
	if pgURL != "" {
		r, h, err := pgJournal(ctx, pgURL) // state.go
		if err != nil {
			return failf("audit verify: %v", err)
		}
		path, f, rowHead = pgstate.Describe(pgURL), r, &h
	} else {
		files, err := openSeries(o.Args) // audit_series.go
		if err != nil {
			return failf("audit verify: %v", err)
		}
		defer ledger.CloseFiles(files)
		if len(files) != 1 || len(o.Args) != 1 || files[0].Name() != o.Args[0] {
			return runAuditVerifySeries(o, files, anchor, wantHash, key)
		}
		path, f, file = files[0].Name(), files[0], files[0]
	}
	// Read line by line, never more than max bytes of one line; a file a
	// proxy may be writing is read again while its last line is torn.
	var res ledger.VerifyResult
	var err error
	if file != nil {
		res, err = ledger.VerifyLiveWith(file, lineLimit(max), key)
	} else {
		res, err = ledger.VerifyWith(boundedio.LineLimit(f, path, max), key)
	}
	var ve *ledger.VerifyError
	if err != nil && !errors.As(err, &ve) {
		return failf("audit verify: %s: %v", path, err)
	}
	// The chain holds: now its end against the heads kept elsewhere.
	var headErr error
	var found uint64
	if ve == nil && rowHead != nil {
		// The database's own anchor: the chain must end at its head row.
		if headErr = ledger.VerifyHead(f, res, *rowHead); headErr == nil && uint64(res.Records) != rowHead.Seq {
			headErr = fmt.Errorf("%d records but the head row says %d: records were added outside planlock", res.Records, rowHead.Seq)
		}
	}
	if ve == nil && headErr == nil && anchor != nil {
		headErr = ledger.VerifyHead(f, res, *anchor)
	}
	if ve == nil && headErr == nil && wantHash != "" {
		if _, err := f.Seek(0, 0); err != nil {
			return failf("audit verify: %s: %v", path, err)
		}
		var ok bool
		if found, ok, err = ledger.FindHash(f, wantHash); err != nil {
			return failf("audit verify: %s: %v", path, err)
		} else if !ok {
			headErr = fmt.Errorf("head %s is not in the audit log: it was truncated or rewritten", wantHash)
		}
	}
	if o.JSON {
		out := newAuditVerifyJSON(res, ve, headErr)
		if err := writeJSONEscaped(o.IO.out, out); err != nil {
			return failf("audit verify: %v", err)
		}
		if !out.OK {
			return silentExit(exitFailure)
		}
		return nil
	}
	if ve != nil {
		return failf("%s: %v", path, ve)
	}
	if headErr != nil {
		return failf("%s: %v", path, headErr)
	}
	if res.First > 1 {
		fmt.Fprintf(o.IO.out, "ok: records %d to %d (a rotated log's later file: the records before %d are in earlier files)\nhead: %s\n",
			res.First, res.Records, res.First, res.Head)
	} else {
		fmt.Fprintf(o.IO.out, "ok: %s\nhead: %s\n", plural(res.Records, "record", "records"), res.Head)
	}
	if anchor != nil {
		fmt.Fprintf(o.IO.out, "anchor: record %d matches\n", anchor.Seq)
	}
	if wantHash != "" {
		fmt.Fprintf(o.IO.out, "head %s: record %d\n", wantHash[:12], found)
	}
	return nil
}

// auditHeadOptions are the flags of planlock audit head.
type auditHeadOptions struct {
	cmdline
	State string
	JSON  bool
}

func (o *auditHeadOptions) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "state", Usage: "the proxy's state `DIR` (default: $XDG_STATE_HOME/planlock or ~/.local/state/planlock), an audit log FILE, or a postgres:// URL", TakesFile: true, Destination: &o.State},
		&cli.BoolFlag{Name: "json", Usage: "print the head as JSON on standard output", Destination: &o.JSON},
	}
}

func auditHeadCommand() *cli.Command {
	o := &auditHeadOptions{}
	return &cli.Command{
		Name:  "head",
		Usage: "print the audit log's head (seq and hash) to keep elsewhere",
		Description: `Prints "seq=N hash=H": the sequence number and hash of the last record the
proxy made durable, as its state directory's anchor (the head file) holds
it. Ship it somewhere the proxy's user cannot rewrite (a log shipper, a
ticket, another host); later, planlock audit verify --anchor FILE tells
whether the log still reaches it.

With --state FILE naming an audit log instead of a directory, the log is
verified and the head of its last record is printed.

Examples:
   planlock audit head
   planlock audit head --state /var/lib/planlock >> /mnt/remote/planlock-heads.txt
   planlock audit head --state audit.jsonl --json

Exit status: 0 when a head was printed, 1 otherwise.`,
		Flags:  o.flags(),
		Action: action(o, runAuditHead),
	}
}

func runAuditHead(_ context.Context, o *auditHeadOptions) error {
	if len(o.Args) != 0 {
		return usageErrorf("audit head: unexpected argument %q", o.Args[0])
	}
	h, err := auditHead(o.State)
	if err != nil {
		return failf("audit head: %v", err)
	}
	if o.JSON {
		return writeJSON(o.IO.out, auditHeadJSON(h))
	}
	fmt.Fprintln(o.IO.out, h)
	return nil
}

// auditHead is the anchored head of a state directory, or the head of an
// audit log file.
func auditHead(state string) (ledger.Head, error) {
	if pgstate.IsURL(state) {
		_, head, err := pgstate.Verify(context.Background(), state)
		return head, err
	}
	if state != "" {
		fi, err := os.Stat(state)
		if err != nil {
			return ledger.Head{}, err
		}
		if !fi.IsDir() {
			f, err := os.Open(state)
			if err != nil {
				return ledger.Head{}, err
			}
			defer f.Close()
			res, err := ledger.Verify(f)
			if err != nil {
				return ledger.Head{}, fmt.Errorf("%s: %w", state, err)
			}
			return ledger.Head{Seq: uint64(res.Records), Hash: res.Head}, nil
		}
	}
	return ledger.ReadHead(ledger.Options{Dir: state})
}

func readHeadFile(path string) (ledger.Head, error) {
	f, err := os.Open(path)
	if err != nil {
		return ledger.Head{}, err
	}
	defer f.Close()
	return ledger.ParseHead(f)
}

func isHexHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
