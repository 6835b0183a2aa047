package main

import "github.com/urfave/cli/v2"

func planCommand() *cli.Command {
	return &cli.Command{
		Name:  "plan",
		Usage: "format, validate and show plan files",
	}
}
