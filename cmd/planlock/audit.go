package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/planlock/planlock/internal/boundedio"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/urfave/cli/v2"
)

func auditCommand() *cli.Command {
	return &cli.Command{
		Name:  "audit",
		Usage: "check the proxy's audit log",
		Subcommands: []*cli.Command{
			auditVerifyCommand(),
		},
	}
}

func auditVerifyCommand() *cli.Command {
	return &cli.Command{
		Name:      "verify",
		Usage:     "check the hash chain of an audit log",
		ArgsUsage: "FILE",
		Description: `Checks that every record of the audit log (JSON Lines, as written by
planlock proxy) still has its own hash, its sequence number and the hash of
the record before it. An edited, removed, inserted or reordered record is
reported with the number of the first bad line. A last line cut short by a
crash is reported as torn (the proxy truncates it when it next starts).

On success it prints the number of records and the head: the hash of the
last record. Keep the head elsewhere to detect a later rewrite of the end of
the log.

Examples:
   planlock audit verify ~/.local/state/planlock/audit.jsonl
   planlock audit verify --json audit.jsonl

Exit status: 0 when the chain holds, 1 otherwise.`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON on standard output"},
			&cli.Int64Flag{Name: "max-line-bytes", Value: boundedio.MaxLineBytes, Usage: "refuse a record longer than `N` bytes (raise it for a log written with a larger --max-message-bytes)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageErrorf("audit verify: give exactly one audit log file")
			}
			path := c.Args().First()
			f, err := os.Open(path)
			if err != nil {
				return failf("audit verify: %v", err)
			}
			defer f.Close()
			max := c.Int64("max-line-bytes")
			if max <= 0 {
				return usageErrorf("audit verify: --max-line-bytes must be positive")
			}
			// Read line by line, never more than max bytes of one line.
			res, err := ledger.Verify(boundedio.LineLimit(f, path, max))
			var ve *ledger.VerifyError
			if err != nil && !errors.As(err, &ve) {
				return failf("audit verify: %s: %v", path, err)
			}
			if c.Bool("json") {
				out := struct {
					OK      bool   `json:"ok"`
					Records int    `json:"records"`
					Head    string `json:"head,omitempty"`
					Line    int    `json:"line,omitempty"`
					Torn    bool   `json:"torn,omitempty"`
					Reason  string `json:"reason,omitempty"`
				}{OK: ve == nil, Records: res.Records}
				if ve == nil {
					out.Head = res.Head
				} else {
					out.Line, out.Torn, out.Reason = ve.Line, ve.Torn, ve.Reason
				}
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				if err := enc.Encode(out); err != nil {
					return failf("audit verify: %v", err)
				}
				if ve != nil {
					return silentExit(exitFailure)
				}
				return nil
			}
			if ve != nil {
				return failf("%s: %v", path, ve)
			}
			fmt.Fprintf(c.App.Writer, "ok: %s\nhead: %s\n", plural(res.Records, "record", "records"), res.Head)
			return nil
		},
	}
}
