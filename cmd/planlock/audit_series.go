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

// openSeries opens the files and directories given to audit verify and
// audit export as one series in chain order. Files are taken in the order
// given (a wrong order is reported by the chain, not repaired). A directory
// stands for one journal's files (ledger.OpenSeries): its archived
// segments in name order, then the journal itself when it is there, read
// as they were when the journal was opened even while a proxy rotates it.
func openSeries(args []string) ([]*os.File, error) {
	var out []*os.File
	for _, a := range args {
		var files []*os.File
		var err error
		if fi, serr := os.Stat(a); serr == nil && fi.IsDir() {
			files, err = ledger.OpenSeries(a)
		} else {
			var f *os.File
			if f, err = os.Open(a); err == nil {
				files = []*os.File{f}
			}
		}
		if err != nil {
			ledger.CloseFiles(out)
			return nil, err
		}
		out = append(out, files...)
	}
	return out, nil
}

// lineLimit bounds each record read to max bytes.
func lineLimit(max int64) func(io.Reader, string) io.Reader {
	return func(r io.Reader, path string) io.Reader { return boundedio.LineLimit(r, path, max) }
}

// seriesHead checks a verified series against a head kept elsewhere, in
// the file that holds the head's record (the last when it is beyond all).
func seriesHead(segs []ledger.SegmentResult, files []*os.File, want ledger.Head) error {
	i := len(segs) - 1
	for j, s := range segs {
		if s.First > 0 && want.Seq+1 >= s.First && want.Seq <= uint64(s.Records) {
			i = j
			break
		}
	}
	return ledger.VerifyHead(io.NewSectionReader(files[i], 0, 1<<62), ledger.VerifyResult{Records: segs[i].Records, Head: segs[i].Head, First: segs[i].First}, want)
}

// seriesFindHash looks for a record hash in every file of a series.
func seriesFindHash(files []*os.File, hash string) (uint64, bool, error) {
	for _, f := range files {
		seq, ok, err := ledger.FindHash(io.NewSectionReader(f, 0, 1<<62), hash)
		if err != nil || ok {
			return seq, ok, err
		}
	}
	return 0, false, nil
}

func auditExportCommand() *cli.Command {
	o := &auditExportOptions{}
	return &cli.Command{
		Name:      "export",
		Usage:     "stream audit records as JSON lines, for a log store or a SIEM",
		ArgsUsage: "FILE...|DIR",
		Description: `Verifies the audit log's hash chain, across its rotated segments, and writes
each record to standard output as one JSON object per line, in order. The
shape is stable (schema "planlock.audit.v1", described in docs/audit-log.md):
the record's fields, its seq, and the chain's prev and hash, so the receiver
can check the chain too.

A DIR stands for the log's files in it: archived segments in name order,
then the log. To ship continuously, keep the last seq stored and resume
after it with --from-seq LAST+1: records before it are verified but not
written. A record a running proxy is still writing (a torn last line) is
left for the next run. A break in the chain stops the export at the break,
with exit status 1.

With --state postgres://... the chain kept in that database is exported
instead (the same lines), after it verified whole and against its head row.

Examples:
   planlock audit export ~/.local/state/planlock/ > audit-export.jsonl
   planlock audit export --from-seq 40001 /var/lib/planlock/refund-4711/

Exit status: 0 when every file verified and was written, 1 otherwise.`,
		Flags:  o.flags(),
		Action: action(o, runAuditExport),
	}
}

// auditExportOptions are the flags of planlock audit export.
type auditExportOptions struct {
	cmdline
	State        string
	FromSeq      uint64
	MaxLineBytes int64
}

func (o *auditExportOptions) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "state", Usage: "export the chain of a PostgreSQL state (postgres:// `URL`) instead of FILEs", Destination: &o.State},
		&cli.Uint64Flag{Name: "from-seq", Value: 1, Usage: "write the records from sequence number `N` on (the last one stored plus one)", Destination: &o.FromSeq},
		&cli.Int64Flag{Name: "max-line-bytes", Value: boundedio.MaxLineBytes, Usage: "refuse a record longer than `N` bytes (raise it for a log written with a larger --max-message-bytes)", Destination: &o.MaxLineBytes},
	}
}

func runAuditExport(ctx context.Context, o *auditExportOptions) error {
	if o.State != "" {
		if !pgstate.IsURL(o.State) || len(o.Args) > 0 {
			return usageErrorf("audit export: --state takes a postgres:// URL, and then no FILE")
		}
		if _, err := pgstate.Export(ctx, o.IO.out, o.State, o.FromSeq); err != nil {
			return failf("audit export: %s: %v", pgstate.Describe(o.State), err)
		}
		return nil
	}
	if len(o.Args) < 1 {
		return usageErrorf("audit export: give the audit log's files or its directory")
	}
	if o.MaxLineBytes <= 0 {
		return usageErrorf("audit export: --max-line-bytes must be positive")
	}
	files, err := openSeries(o.Args)
	if err != nil {
		return failf("audit export: %v", err)
	}
	defer ledger.CloseFiles(files)
	if _, err := ledger.ExportFiles(o.IO.out, files, o.FromSeq, lineLimit(o.MaxLineBytes)); err != nil {
		return failf("audit export: %v", err)
	}
	return nil
}

// runAuditVerifySeries is audit verify over several files.
func runAuditVerifySeries(o *auditVerifyOptions, files []*os.File, anchor *ledger.Head, wantHash string, key *ledger.StateKey) error {
	segs, res, err := ledger.VerifyFilesWith(files, lineLimit(o.MaxLineBytes), key)
	var se *ledger.SeriesError
	if err != nil && !errors.As(err, &se) {
		return failf("audit verify: %v", err)
	}
	var headErr error
	var found uint64
	if se == nil && anchor != nil {
		headErr = seriesHead(segs, files, *anchor)
	}
	if se == nil && headErr == nil && wantHash != "" {
		var ok bool
		if found, ok, err = seriesFindHash(files, wantHash); err != nil {
			return failf("audit verify: %v", err)
		} else if !ok {
			headErr = fmt.Errorf("head %s is not in the audit log: it was truncated or rewritten", wantHash)
		}
	}
	if o.JSON {
		out := newAuditVerifySeriesJSON(segs, res, se, headErr)
		if err := writeJSONEscaped(o.IO.out, out); err != nil {
			return failf("audit verify: %v", err)
		}
		if !out.OK {
			return silentExit(exitFailure)
		}
		return nil
	}
	if se != nil {
		return failf("%v", se)
	}
	if headErr != nil {
		return failf("%v", headErr)
	}
	from := ""
	if res.First > 1 {
		from = fmt.Sprintf(" (from seq %d: the records before it are in files not given)", res.First)
	}
	fmt.Fprintf(o.IO.out, "ok: %s in %s%s\nhead: %s\n", plural(res.Records-int(max(res.First, 1))+1, "record", "records"),
		plural(len(segs), "file", "files"), from, res.Head)
	if anchor != nil {
		fmt.Fprintf(o.IO.out, "anchor: record %d matches\n", anchor.Seq)
	}
	if wantHash != "" {
		fmt.Fprintf(o.IO.out, "head %s: record %d\n", wantHash[:12], found)
	}
	return nil
}
