package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/planlock/planlock/hclplan"
	"github.com/planlock/planlock/internal/atomicfile"
	"github.com/planlock/planlock/internal/boundedio"
	"github.com/rogpeppe/go-internal/diff"
	"github.com/urfave/cli/v2"
)

func planFmtCommand() *cli.Command {
	o := &planFmtOptions{}
	return &cli.Command{
		Name:      "fmt",
		Usage:     "rewrite plan files in canonical format",
		ArgsUsage: "[PATH ... | -]",
		Description: `Rewrites .hcl plan files in the canonical layout (aligned "=", two-space
indentation, comments kept) and prints the name of each file it changed.
With no PATH, formats the .hcl files of the current directory. "-" reads a
plan from standard input and writes it formatted to standard output.

Examples:
   planlock plan fmt                      # format ./*.hcl
   planlock plan fmt --recursive plans/   # format plans/ and its subdirectories
   planlock plan fmt --check --diff .     # CI: list and show what is not formatted
   cat refund.hcl | planlock plan fmt -   # filter

Exit status: 0 when done, 3 when --check found files to format, 1 on a
syntax error or an unreadable file.`,
		Flags:  o.flags(),
		Action: action(o, runPlanFmt),
	}
}

// planFmtOptions are the flags of planlock plan fmt.
type planFmtOptions struct {
	cmdline
	Check     bool
	Diff      bool
	Recursive bool
}

func (o *planFmtOptions) flags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "check", Usage: "change nothing; list files that are not formatted and exit 3 if any", Destination: &o.Check},
		&cli.BoolFlag{Name: "diff", Usage: "print the changes as a unified diff", Destination: &o.Diff},
		&cli.BoolFlag{Name: "recursive", Aliases: []string{"r"}, Usage: "also format the .hcl files of subdirectories", Destination: &o.Recursive},
	}
}

func runPlanFmt(_ context.Context, o *planFmtOptions) error {
	f := &fmtRun{check: o.Check, diff: o.Diff, recursive: o.Recursive, stdout: o.IO.out, stderr: o.IO.err}
	args := o.Args
	if len(args) == 0 {
		args = []string{"."}
	}
	for _, a := range args {
		if a == "-" {
			if len(args) > 1 {
				return usageErrorf("plan fmt: \"-\" (standard input) cannot be combined with other paths")
			}
			f.stdin(o.IO.in)
			continue
		}
		f.path(a)
	}
	switch {
	case f.failed:
		return silentExit(exitFailure)
	case f.check && f.unformatted:
		return silentExit(exitUnformat)
	}
	return nil
}

type fmtRun struct {
	check, diff, recursive bool
	stdout, stderr         io.Writer
	failed, unformatted    bool
}

func (f *fmtRun) errorf(format string, a ...any) {
	fmt.Fprintf(f.stderr, "planlock: "+format+"\n", a...)
	f.failed = true
}

func (f *fmtRun) stdin(r io.Reader) {
	src, err := boundedio.ReadAll(r, "standard input", boundedio.MaxPlanBytes)
	if errors.Is(err, boundedio.ErrTooLarge) {
		f.errorf("%v", err)
		return
	}
	if err != nil {
		f.errorf("read standard input: %v", err)
		return
	}
	out, ok := f.format("<stdin>", src)
	if !ok {
		return
	}
	changed := !bytes.Equal(src, out)
	if changed {
		f.unformatted = true
	}
	if f.diff && changed {
		f.stdout.Write(diff.Diff("<stdin>", src, "<stdin> (formatted)", out))
	}
	if !f.check && !f.diff {
		f.stdout.Write(out)
	}
}

func (f *fmtRun) path(p string) {
	files, skipped, err := planFiles(p, f.recursive)
	if err != nil {
		f.errorf("%v", err)
		return
	}
	if len(files) == 0 {
		// terraform fmt is silent here, but a --check that checked nothing
		// must not pass unnoticed.
		fmt.Fprintf(f.stderr, "planlock: %s\n", noPlanFiles(p, skipped))
	}
	for _, file := range files {
		st, err := os.Stat(file)
		if err != nil {
			f.errorf("%v", err)
			continue
		}
		f.file(file, st.Mode())
	}
}

func (f *fmtRun) file(path string, mode fs.FileMode) {
	src, err := boundedio.ReadFile(path, boundedio.MaxPlanBytes)
	if err != nil {
		f.errorf("%v", err)
		return
	}
	out, ok := f.format(path, src)
	if !ok || bytes.Equal(src, out) {
		return
	}
	f.unformatted = true
	fmt.Fprintln(f.stdout, path)
	if f.diff {
		f.stdout.Write(diff.Diff(path, src, path+" (formatted)", out))
	}
	if f.check {
		return
	}
	if err := writeFileAtomic(path, out, mode.Perm()); err != nil {
		f.errorf("%v", err)
	}
}

func (f *fmtRun) format(name string, src []byte) ([]byte, bool) {
	out, diags := hclplan.Format(name, src)
	if diags.HasErrors() {
		files := sources{}
		files.add(name, src)
		writeDiagnostics(f.stderr, files, diags)
		f.failed = true
		return nil, false
	}
	return out, true
}

// writeFileAtomic replaces path so that a crash leaves the old or the new
// content, never half of it.
func writeFileAtomic(path string, data []byte, perm fs.FileMode) error {
	if err := atomicfile.Write(path, data, perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
