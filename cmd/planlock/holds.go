package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/planlock/planlock/proxy/ledger"
	"github.com/urfave/cli/v2"
)

func holdsCommand() *cli.Command {
	flags := func() []cli.Flag {
		return []cli.Flag{
			&cli.StringFlag{Name: "state", Usage: "the proxy's state directory (default: $XDG_STATE_HOME/planlock or ~/.local/state/planlock)", TakesFile: true},
			&cli.StringFlag{Name: "audit", Usage: "the audit log holding the state (default: the one the state directory is bound to)", TakesFile: true},
			&cli.BoolFlag{Name: "json", Usage: "print JSON on standard output"},
		}
	}
	return &cli.Command{
		Name:  "holds",
		Usage: "list and show held calls waiting for approval",
		Description: `Reads the holds from the proxy's state (its audit log) without taking the
proxy's lock, so it works while the proxy runs.`,
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "list the holds, oldest first",
				Description: `Examples:
   planlock holds list
   planlock holds list --state /var/lib/planlock --json`,
				Flags: flags(),
				Action: func(c *cli.Context) error {
					if c.NArg() != 0 {
						return usageErrorf("holds list: unexpected argument %q", c.Args().First())
					}
					snap, err := inspectState(c)
					if err != nil {
						return err
					}
					holds := snap.ListHolds()
					if c.Bool("json") {
						return writeJSON(c.App.Writer, holds)
					}
					if len(holds) == 0 {
						fmt.Fprintf(c.App.Writer, "no holds in %s\n", snap.AuditPath())
						return nil
					}
					writeHoldTable(c.App.Writer, holds)
					return nil
				},
			},
			{
				Name:      "show",
				Usage:     "show one hold",
				ArgsUsage: "ID",
				Description: `Examples:
   planlock holds show 6f1c0d2a9b8e7f60
   planlock holds show --json 6f1c0d2a9b8e7f60`,
				Flags: flags(),
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return usageErrorf("holds show: give exactly one hold id")
					}
					snap, err := inspectState(c)
					if err != nil {
						return err
					}
					h, ok := snap.GetHold(c.Args().First())
					if !ok {
						return failf("holds show: no hold %q in %s", c.Args().First(), snap.AuditPath())
					}
					if c.Bool("json") {
						return writeJSON(c.App.Writer, h)
					}
					writeHold(c.App.Writer, h)
					return nil
				},
			},
		},
	}
}

func inspectState(c *cli.Context) (*ledger.Snapshot, error) {
	snap, err := ledger.Inspect(c.Context, ledger.Options{Dir: c.String("state"), AuditPath: c.String("audit")})
	if err != nil {
		return nil, failf("holds %s: %v", c.Command.Name, err)
	}
	return snap, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return failf("%v", err)
	}
	return nil
}

func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func writeHoldTable(w io.Writer, holds []ledger.Hold) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tSTEP\tTOOL\tPLAN\tEXPIRES\tPR")
	for _, h := range holds {
		pr := h.PRURL
		if pr == "" {
			pr = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.ID, h.State, h.Step, h.Tool, shortDigest(h.PlanDigest), formatTime(h.Expires), pr)
	}
	tw.Flush()
}

func writeHold(w io.Writer, h ledger.Hold) {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	args := string(h.Args)
	if args == "" {
		args = "(redacted)"
	}
	pr := h.PRURL
	if pr == "" {
		pr = "-"
	}
	fmt.Fprintf(tw, "hold:\t%s\n", h.ID)
	fmt.Fprintf(tw, "state:\t%s\n", h.State)
	fmt.Fprintf(tw, "plan:\t%s\n", h.PlanDigest)
	fmt.Fprintf(tw, "step:\t%s (#%d)\n", h.Step, h.StepIndex+1)
	fmt.Fprintf(tw, "tool:\t%s\n", h.Tool)
	fmt.Fprintf(tw, "arguments:\t%s\n", args)
	fmt.Fprintf(tw, "arguments sha256:\t%s\n", h.ArgsSHA256)
	fmt.Fprintf(tw, "reason:\t%s\n", h.Reason)
	if h.Cause != "" { // holds recorded before causes were have none
		fmt.Fprintf(tw, "cause:\t%s\n", h.Cause)
	}
	if h.ObservedPin != "" {
		fmt.Fprintf(tw, "observed pin:\t%s\n", h.ObservedPin)
	}
	fmt.Fprintf(tw, "pull request:\t%s\n", pr)
	fmt.Fprintf(tw, "created:\t%s\n", formatTime(h.Created))
	fmt.Fprintf(tw, "expires:\t%s\n", formatTime(h.Expires))
	fmt.Fprintf(tw, "updated:\t%s\n", formatTime(h.Updated))
	tw.Flush()
}
