package main

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/planlock/planlock/internal/editdist"
	"github.com/urfave/cli/v2"
)

// Flags anywhere, as gh and cosign users type them:
//
//	planlock verify plan.hcl --key k.pub
//
// urfave/cli v2 hands everything after the first positional argument to the
// command as arguments, so "--key" would be read as a file name. Rather than
// move to urfave/cli v3 (a rewrite of every command, its Context, flag and
// help APIs, for the one behaviour needed here), the command line is put in
// the order v2 parses before it runs: each command's flags (and their
// values) first, then its positional arguments, then "--" and everything
// after it untouched. Which flags take a value is read from the command's
// own flag definitions at run time, so a flag added to any command later is
// handled without a list kept here.

// commandLine is the command line after normalizeArgs.
type commandLine struct {
	args []string // in the order urfave/cli parses
	path []string // the command names, e.g. ["plan", "init"]
}

// unknownCommandError is an unknown (sub)command name, with the nearest
// known one when there is one close enough.
type unknownCommandError struct {
	name, parent, suggestion string
}

func (e *unknownCommandError) Error() string {
	msg := fmt.Sprintf("unknown command %q for %q", e.name, e.parent)
	if e.suggestion != "" {
		msg += fmt.Sprintf("; did you mean %s?", e.suggestion)
	}
	return msg
}

// completionFlag is the flag urfave/cli's shell completion appends last.
const completionFlag = "--generate-bash-completion"

// normalizeArgs finds the command path in args (args[0] is the program) and
// moves the flags of the last command before its positional arguments.
func normalizeArgs(app *cli.App, args []string) (commandLine, error) {
	cl := commandLine{args: args}
	if len(args) < 2 || args[len(args)-1] == completionFlag {
		// Completion asks about a half-typed line: leave it as typed.
		return cl, nil
	}
	out := []string{args[0]}
	rest := args[1:]
	flags := flagArity(append(slices.Clone(app.Flags), cli.HelpFlag, cli.VersionFlag))
	cmds := app.Commands
	parent := app.Name
	var leaf *cli.Command
	for {
		// This level's flags, up to the command name.
		i := 0
		for i < len(rest) && isFlag(rest[i]) {
			i += flagLen(rest[i:], flags)
		}
		if i >= len(rest) || rest[i] == "--" || len(cmds) == 0 {
			break
		}
		name := rest[i]
		if name == "help" || name == "h" {
			// "planlock help plan init", as in gh: the help of that command.
			again := append(append(slices.Clone(out), rest[:i]...), rest[i+1:]...)
			return normalizeArgs(app, append(again, "--help"))
		}
		cmd := findCommand(cmds, name)
		if cmd == nil {
			return cl, &unknownCommandError{name: name, parent: parent, suggestion: nearestCommand(cmds, name)}
		}
		out = append(out, rest[:i+1]...)
		rest = rest[i+1:]
		cl.path = append(cl.path, cmd.Name)
		leaf = cmd
		parent += " " + cmd.Name
		flags = flagArity(append(slices.Clone(cmd.Flags), cli.HelpFlag))
		cmds = cmd.Subcommands
		if cmd.SkipFlagParsing {
			// The command reads its arguments itself (config show takes
			// another command's line): leave them exactly as typed.
			cl.args = append(out, rest...)
			return cl, nil
		}
		if len(cmds) == 0 {
			break
		}
	}
	rest, err := reorder(rest, flags)
	if err != nil {
		return cl, err
	}
	if leaf != nil {
		if err := requiredFlags(leaf, rest); err != nil {
			return cl, err
		}
	}
	cl.args = append(out, rest...)
	return cl, nil
}

// reorder puts flags (with their values) first, then positional arguments,
// then "--" and what follows it as given.
func reorder(args []string, flags map[string]bool) ([]string, error) {
	var fl, pos []string
	for i := 0; i < len(args); {
		if args[i] == "--" {
			pos = append(pos, args[i:]...)
			break
		}
		if !isFlag(args[i]) {
			pos = append(pos, args[i])
			i++
			continue
		}
		n := flagLen(args[i:], flags)
		if name := strings.TrimLeft(args[i], "-"); n == 1 && flags[name] {
			// Moved before the arguments, it would take one as its value.
			return nil, usageErrorf("flag needs an argument: %s", args[i])
		}
		fl = append(fl, args[i:i+n]...)
		i += n
	}
	return append(fl, pos...), nil
}

// isFlag reports whether a looks like a flag; "-" alone means standard input
// and "--" ends the flags.
func isFlag(a string) bool { return len(a) > 1 && a[0] == '-' && a != "--" }

// flagLen is how many arguments the flag at args[0] takes: 2 when it is a
// known flag that takes a value given as the next argument, else 1. An
// unknown flag stays a single argument so that urfave/cli names it.
func flagLen(args []string, flags map[string]bool) int {
	name := strings.TrimLeft(args[0], "-")
	if strings.Contains(name, "=") {
		return 1
	}
	if flags[name] && len(args) > 1 {
		return 2
	}
	return 1
}

// flagArity maps every name and alias of flags to whether it takes a value.
func flagArity(flags []cli.Flag) map[string]bool {
	m := map[string]bool{}
	for _, f := range flags {
		if f == nil {
			continue
		}
		takes := true // a flag type that does not say is read as taking one
		if d, ok := f.(cli.DocGenerationFlag); ok {
			takes = d.TakesValue()
		}
		for _, n := range f.Names() {
			m[n] = takes
		}
	}
	return m
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// nearestCommand is the visible command closest to name (a prefix of it, or
// within two edits), "" when none is close.
func nearestCommand(cmds []*cli.Command, name string) string {
	best, bestD := "", 3
	for _, c := range cmds {
		if c.Hidden {
			continue
		}
		for _, n := range c.Names() {
			d := editdist.Distance(name, n)
			if strings.HasPrefix(n, name) && len(name) >= 2 {
				d = 0
			}
			if d < bestD {
				best, bestD = c.Name, d
			}
		}
	}
	return best
}

// requiredFlags reports a required flag that args (the command's own,
// reordered) do not set, as a usage error. urfave/cli would print the whole
// help to standard output first.
func requiredFlags(cmd *cli.Command, args []string) error {
	given := map[string]bool{}
	for _, a := range args {
		if a == "--" {
			break
		}
		if isFlag(a) {
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			given[name] = true
		}
	}
	if given["help"] || given["h"] {
		return nil
	}
	for _, f := range cmd.Flags {
		r, ok := f.(cli.RequiredFlag)
		if !ok || !r.IsRequired() || slices.ContainsFunc(f.Names(), func(n string) bool { return given[n] }) {
			continue
		}
		if e, ok := f.(interface{ GetEnvVars() []string }); ok && slices.ContainsFunc(e.GetEnvVars(), func(v string) bool {
			_, set := os.LookupEnv(v)
			return set
		}) {
			continue
		}
		return usageErrorf("required flag --%s not set", f.Names()[0])
	}
	return nil
}

var undefinedFlag = regexp.MustCompile(`flag provided but not defined: -+(\S+)`)

// suggestFlag adds the nearest flag of the command to an unknown-flag error.
func suggestFlag(app *cli.App, path []string, err error) error {
	m := undefinedFlag.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	flags := app.Flags
	cmds := app.Commands
	for _, name := range path {
		c := findCommand(cmds, name)
		if c == nil {
			return err
		}
		flags, cmds = c.Flags, c.Subcommands
	}
	best, bestD := "", 3
	for _, f := range flags {
		for _, n := range f.Names() {
			if d := editdist.Distance(m[1], n); d < bestD && len(n) > 1 {
				best, bestD = n, d
			}
		}
	}
	if best == "" {
		return err
	}
	return fmt.Errorf("%w; did you mean --%s?", err, best)
}
