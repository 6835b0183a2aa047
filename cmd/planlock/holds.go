package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/planlock/planlock/internal/approvals"
	"github.com/planlock/planlock/proxy/ledger"
	"github.com/planlock/planlock/proxy/ledger/pgstate"
	"github.com/urfave/cli/v2"
)

// holdStateOptions name the state the holds commands read.
type holdStateOptions struct {
	stateOptions
	Audit string
}

func (o *holdStateOptions) auditFlag() cli.Flag {
	return &cli.StringFlag{Name: "audit", Usage: "the audit log holding the state (default: the one the state directory is bound to)", TakesFile: true, Destination: &o.Audit}
}

// holdsReadOptions are the flags of planlock holds list and holds show.
type holdsReadOptions struct {
	cmdline
	holdStateOptions
	JSON bool
}

func (o *holdsReadOptions) flags() []cli.Flag {
	return append(o.stateOptions.flags(), o.auditFlag(),
		&cli.BoolFlag{Name: "json", Usage: "print JSON on standard output", Destination: &o.JSON})
}

func holdsCommand() *cli.Command {
	list, show := &holdsReadOptions{}, &holdsReadOptions{}
	return &cli.Command{
		Name:  "holds",
		Usage: "list, show, approve and reject held calls",
		Description: `Reads the holds from the proxy's state (its audit log) without taking the
proxy's lock, so it works while the proxy runs. Without --state, every plan's
state directory under the state root is read.

A proxy without a Git remote keeps its holds in the state; approve one with
planlock holds approve (a signed hold approval the proxy verifies with its
trust policy) or reject it with planlock holds reject.`,
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "list the holds, oldest first",
				Description: `Examples:
   planlock holds list
   planlock holds list --state /var/lib/planlock --json`,
				Flags:  list.flags(),
				Action: action(list, runHoldsList),
			},
			{
				Name:      "show",
				Usage:     "show one hold",
				ArgsUsage: "ID",
				Description: `Examples:
   planlock holds show 6f1c0d2a9b8e7f60
   planlock holds show --json 6f1c0d2a9b8e7f60`,
				Flags:  show.flags(),
				Action: action(show, runHoldsShow),
			},
			holdsApproveCommand(), // holds_approve.go
			holdsRejectCommand(),
		},
	}
}

func runHoldsList(ctx context.Context, o *holdsReadOptions) error {
	if len(o.Args) != 0 {
		return usageErrorf("holds list: unexpected argument %q", o.Args[0])
	}
	snaps, err := o.inspect(ctx, "list")
	if err != nil {
		return err
	}
	var all []holdJSON
	for _, snap := range snaps {
		all = append(all, o.localDecisions(snap, snap.ListHolds())...)
	}
	w := o.IO.out
	if o.JSON {
		if all == nil {
			all = []holdJSON{}
		}
		return writeJSON(w, all)
	}
	for i, snap := range snaps {
		holds := o.localDecisions(snap, snap.ListHolds())
		if len(snaps) > 1 {
			if i > 0 {
				fmt.Fprintln(w)
			}
			fmt.Fprintf(w, "%s:\n", snap.AuditPath())
		}
		if len(holds) == 0 {
			fmt.Fprintf(w, "no holds in %s\n", snap.AuditPath())
			continue
		}
		writeHoldTable(w, holds)
	}
	return nil
}

func runHoldsShow(ctx context.Context, o *holdsReadOptions) error {
	if len(o.Args) != 1 {
		return usageErrorf("holds show: give exactly one hold id")
	}
	_, h, err := o.findHold(ctx, "show", o.Args[0])
	if err != nil {
		return err
	}
	if o.JSON {
		return writeJSON(o.IO.out, holdJSON(h))
	}
	writeHold(o.IO.out, h)
	return nil
}

// inspect reads the state --state (or --audit) names, else every plan's
// state directory under the state root (and the root itself, where a proxy
// given --state-root's directory as --state keeps its state).
func (o *holdStateOptions) inspect(ctx context.Context, cmd string) ([]*ledger.Snapshot, error) {
	fail := func(err error) error { return failf("holds %s: %v", cmd, err) }
	if pgstate.IsURL(o.State) {
		snap, err := pgSnapshot(ctx, o.State) // state.go
		if err != nil {
			return nil, fail(err)
		}
		return []*ledger.Snapshot{snap}, nil
	}
	if o.State != "" || o.Audit != "" {
		snap, err := ledger.Inspect(ctx, ledger.Options{Dir: o.State, AuditPath: o.Audit})
		if err != nil {
			return nil, fail(err)
		}
		return []*ledger.Snapshot{snap}, nil
	}
	root, err := o.root()
	if err != nil {
		return nil, err
	}
	dirs := []string{root}
	entries, err := os.ReadDir(root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fail(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join(root, e.Name()))
		}
	}
	var snaps []*ledger.Snapshot
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "audit.jsonl")); err != nil {
			continue
		}
		snap, err := ledger.Inspect(ctx, ledger.Options{Dir: d})
		if err != nil {
			return nil, fail(err)
		}
		snaps = append(snaps, snap)
	}
	if len(snaps) == 0 {
		return nil, fail(fmt.Errorf("no state in %s: no proxy has run there (a plan's state is %s)", root, filepath.Join(root, "<file>-<identity>", "audit.jsonl")))
	}
	return snaps, nil
}

// findHold finds hold id in the states inspect reads; it returns the
// state directory holding it.
func (o *holdStateOptions) findHold(ctx context.Context, cmd, id string) (string, ledger.Hold, error) {
	snaps, err := o.inspect(ctx, cmd)
	if err != nil {
		return "", ledger.Hold{}, err
	}
	var where []string
	for _, snap := range snaps {
		if h, ok := snap.GetHold(id); ok {
			return filepath.Dir(snap.AuditPath()), o.localDecisions(snap, []ledger.Hold{h})[0], nil
		}
		where = append(where, snap.AuditPath())
	}
	return "", ledger.Hold{}, failf("holds %s: no hold %q in %s", cmd, id, strings.Join(where, ", "))
}

// localDecisions shows a local hold that planlock holds reject marked
// (<state>/approvals/ID.rejected) as rejected: the proxy records the
// rejection only when the agent repeats the call, and until then the state
// alone still says pending.
func (o *holdStateOptions) localDecisions(snap *ledger.Snapshot, holds []ledger.Hold) []ledger.Hold {
	if pgstate.IsURL(o.State) {
		return holds // no local approvals beside a shared state
	}
	dir := filepath.Dir(snap.AuditPath())
	if o.State != "" {
		dir = o.State
	}
	for i, h := range holds {
		if h.State != ledger.HoldPending || h.PRURL != approvals.LocalPR {
			continue
		}
		if _, err := os.Stat(approvals.LocalRejectionPath(dir, h.ID)); err == nil {
			holds[i].State = ledger.HoldRejected
		}
	}
	return holds
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
