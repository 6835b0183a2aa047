package main

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"
)

// How a command is written (as cosign's options/*.go and gh's XOptions +
// runX): flags are read into an options struct, never by string key, so a
// misspelt flag name cannot silently read "".
//
//	// fooOptions are the flags of planlock foo.
//	type fooOptions struct {
//		cmdline                // positional arguments, streams, given()
//		stateOptions           // a shared flag group, embedded where used
//		Name string
//		JSON bool
//	}
//
//	// flags binds each flag to its field (Destination), so the command
//	// line, PLANLOCK_* variables and the operator config file (config.go
//	// sets flags with c.Set, which writes through Destination) all land in
//	// the struct before runFoo is called.
//	func (o *fooOptions) flags() []cli.Flag {
//		return append([]cli.Flag{
//			&cli.StringFlag{Name: "name", Usage: "...", Destination: &o.Name},
//			&cli.BoolFlag{Name: "json", Usage: "...", Destination: &o.JSON},
//		}, o.stateOptions.flags()...)
//	}
//
//	func fooCommand() *cli.Command {
//		o := &fooOptions{}
//		return &cli.Command{Name: "foo", Usage: "...", Flags: o.flags(), Action: action(o, runFoo)}
//	}
//
//	// runFoo holds the logic; it reads o, writes to o.IO, and returns
//	// usageErrorf (exit 2) or failf (exit 1) errors.
//	func runFoo(ctx context.Context, o *fooOptions) error { ... }
//
// A new command is listed in commands() (app.go); its environment variables
// other than its flags' go in commandEnv() (env.go), and every example in
// its help needs an entry in help_run_test.go. Shared flag groups (trust,
// state, upstream, GitHub) are one struct each: embed the group, append its
// flags(). Nothing else is needed for PLANLOCK_* variables, the config file,
// config show, completion or flags anywhere on the line: they work on the
// flags a command declares. TestNoFlagReadByName fails on any c.String("…")
// style read outside the generic settings code.

// cmdline is what a command's options carry besides their flags: the
// positional arguments, the streams, and which flags were given. action
// fills it before the run function is called.
type cmdline struct {
	Args []string
	IO   streams
	c    *cli.Context
}

func (cl *cmdline) bind(c *cli.Context) {
	cl.Args = c.Args().Slice()
	cl.IO = streams{in: c.App.Reader, out: c.App.Writer, err: c.App.ErrWriter}
	cl.c = c
}

// errw writes one line to standard error.
func (cl *cmdline) errw(s string) { fmt.Fprintln(cl.IO.err, s) }

// given reports whether a flag was set on the command line, in the
// environment or by the config file (urfave's IsSet), and not overridden by
// a nearer source (trust_sources.go). name must be a flag of the command: a
// misspelt name panics, in tests, instead of reading false.
func (cl *cmdline) given(name string) bool {
	cl.mustHave(name)
	return cl.c.IsSet(name) && !dropped(cl.c, name)
}

// typed reports whether a flag was set on the command line or in the
// environment, not by the config file (a command that prints a command line
// to run elsewhere passes on only these: the config file is read there too).
func (cl *cmdline) typed(name string) bool {
	return cl.given(name) && !fromConfig(cl.c, name)
}

func (cl *cmdline) mustHave(name string) {
	if cl.c == nil || !hasFlag(cl.c.Command.Flags, name) {
		panic(fmt.Sprintf("planlock: no flag --%s on this command", name))
	}
}

// binder is an options struct that embeds cmdline.
type binder interface{ bind(*cli.Context) }

// action adapts run to urfave/cli: by the time the action runs, urfave/cli
// and the config file have filled opts' fields; action adds the arguments
// and streams and calls run with the command's context.
func action[O binder](opts O, run func(context.Context, O) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		opts.bind(c)
		return run(c.Context, opts)
	}
}
