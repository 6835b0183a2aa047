package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"
)

// version may be set at build time with -ldflags "-X main.version=..."; when
// it is not, the module version from the build info is used.
var version = ""

// Exit codes of the contract.
const (
	exitOK       = 0
	exitFailure  = 1
	exitUsage    = 2
	exitUnformat = 3
)

type streams struct {
	in  io.Reader
	out io.Writer
	err io.Writer
}

// exitError carries an exit code and, optionally, a message already written.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// usageErrorf reports a usage error (exit 2).
func usageErrorf(format string, a ...any) error {
	return &exitError{code: exitUsage, msg: fmt.Sprintf(format, a...)}
}

// failf reports a failure (exit 1).
func failf(format string, a ...any) error {
	return &exitError{code: exitFailure, msg: fmt.Sprintf(format, a...)}
}

// silentExit ends the command with code; its output was already written.
func silentExit(code int) error { return &exitError{code: code} }

func newApp(s streams) *cli.App {
	app := &cli.App{
		Name:    "planlock",
		Usage:   "a signed, Git-approved plan between an AI agent and its MCP tools",
		Version: versionLine(),
		Description: `planlock gates an agent's MCP tool calls with a plan written in HCL,
approved by merging a pull request and signed with sigstore.

  planlock plan validate refund.hcl          # check a plan
  planlock approve refund.hcl                 # open the approval pull request
  planlock proxy --plan refund.hcl            # gate the agent's calls

See https://github.com/planlock/planlock for the plan language.`,
		Reader:                s.in,
		CustomAppHelpTemplate: rootHelpTemplate(),
		Writer:                s.out,
		ErrWriter:             s.err,
		EnableBashCompletion:  true,
		HideHelpCommand:       true,
		// Errors are printed once, by run, with the exit code they carry.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return usageErrorf("%v", err)
		},
		Commands: commands(),
	}
	applySettings(app.Commands, nil) // PLANLOCK_* variables and the config file (config.go)
	usageErrors(app.Commands)
	documentEnv(app.Commands, "") // env.go
	return app
}

// usageErrors makes a flag error of every command a usage error (exit 2,
// printed once by run) instead of urfave's "Incorrect Usage" and full help
// on standard output.
func usageErrors(cmds []*cli.Command) {
	for _, c := range cmds {
		c.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
			return usageErrorf("%v", err)
		}
		usageErrors(c.Subcommands)
	}
}

// commands lists the top-level commands; each lives in its own file, with
// an options struct and a runX function (options.go says how to add one).
func commands() []*cli.Command {
	return []*cli.Command{
		in(catAuthor, planCommand()),
		in(catAuthor, toolsCommand()),
		in(catApprove, approveCommand()),
		in(catApprove, initCommand()),
		in(catApprove, keygenCommand()),
		in(catApprove, signCommand()),
		in(catApprove, verifyCommand()),
		in(catApprove, reconcileCommand()),
		in(catApprove, checkPRCommand()),
		in(catRun, proxyCommand()),
		in(catRun, serveCommand()),
		in(catRun, mcpConfigCommand()),
		in(catRun, stateCommand()),
		in(catInspect, holdsCommand()),
		in(catInspect, auditCommand()),
		in(catInspect, doctorCommand()),
		versionCommand(),
		completionCommand(),
		configCommand(),
	}
}

// run is main without os.Exit, so tests can drive the CLI as a user types it.
func run(ctx context.Context, args []string, s streams) int {
	app := newApp(s)
	cl, err := normalizeArgs(app, args) // args.go: flags anywhere
	if err == nil {
		// Which flags were typed, to tell them from PLANLOCK_* variables.
		app.Metadata = map[string]any{argsKey: cl.args}
		err = app.RunContext(ctx, cl.args)
	}
	if err != nil {
		err = suggestFlag(app, cl.path, err) // args.go
	}
	code := exitCode(err)
	if err != nil {
		var ee *exitError
		if !errors.As(err, &ee) || ee.msg != "" {
			fmt.Fprintf(s.err, "planlock: %s\n", err)
		}
	}
	if code == exitUsage {
		// As gh does: the error, then where to read the usage.
		fmt.Fprintf(s.err, "Run '%s --help' for usage.\n", strings.Join(append([]string{app.Name}, cl.path...), " "))
	}
	return code
}

func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	var unknown *unknownCommandError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &unknown):
		return exitUsage
	case strings.Contains(err.Error(), "flag provided but not defined") || strings.HasPrefix(err.Error(), "No help topic"):
		// urfave/cli reports these as plain errors.
		return exitUsage
	}
	return exitFailure
}
