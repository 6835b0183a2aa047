package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

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
		Version: version,
		Description: `planlock gates an agent's MCP tool calls with a plan written in HCL,
approved by merging a pull request and signed with sigstore.

  planlock plan validate refund.hcl          # check a plan
  planlock approve refund.hcl                 # open the approval pull request
  planlock proxy --plan refund.hcl -- node server.js

See https://github.com/planlock/planlock for the plan language.`,
		Reader:               s.in,
		Writer:               s.out,
		ErrWriter:            s.err,
		EnableBashCompletion: true,
		HideHelpCommand:      true,
		// Errors are printed once, by run, with the exit code they carry.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return usageErrorf("%v", err)
		},
		Commands: commands(),
	}
	return app
}

// commands lists the top-level commands; each lives in its own file.
func commands() []*cli.Command {
	return []*cli.Command{
		planCommand(),
		proxyCommand(),
		toolsCommand(),
		mcpConfigCommand(),
		signCommand(),
		verifyCommand(),
		keygenCommand(),
		auditCommand(),
		holdsCommand(),
		approveCommand(),
		initCommand(),
		reconcileCommand(),
		checkPRCommand(),
		doctorCommand(),
	}
}

// run is main without os.Exit, so tests can drive the CLI as a user types it.
func run(ctx context.Context, args []string, s streams) int {
	app := newApp(s)
	err := app.RunContext(ctx, args)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintf(s.err, "planlock: %s\n", ee.msg)
		}
		return ee.code
	}
	msg := err.Error()
	// urfave/cli reports unknown commands and flags as plain errors.
	if strings.Contains(msg, "flag provided but not defined") || strings.HasPrefix(msg, "No help topic") {
		fmt.Fprintf(s.err, "planlock: %s\n", msg)
		return exitUsage
	}
	fmt.Fprintf(s.err, "planlock: %s\n", msg)
	return exitFailure
}
