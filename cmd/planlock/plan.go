package main

import (
	"github.com/urfave/cli/v2"
)

func planCommand() *cli.Command {
	return &cli.Command{
		Name:  "plan",
		Usage: "format, validate, test, show and suggest plan files",
		Description: `A plan is an HCL file naming the MCP tools an agent may call, with which
arguments, how many times and in what order. These commands work like
terraform fmt and terraform validate.`,
		Subcommands: []*cli.Command{
			planFmtCommand(),
			planValidateCommand(),
			planTestCommand(),
			planSuggestCommand(),
			planShowCommand(),
			planInitCommand(),
		},
	}
}
