package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/planlock/planlock/proxy"
	"github.com/planlock/planlock/proxy/catalog"
)

// upstreamFlags are the flags that name an upstream outside a plan.
func upstreamFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "upstream-url", Usage: "streamable HTTP `URL` of the upstream"},
		&cli.StringSliceFlag{Name: "env", Usage: "pass environment variable `NAME` to a stdio upstream (repeatable)"},
		&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "give up on the upstream after this long"},
	}
}

// cliUpstream reads the upstream from -- COMMAND or --upstream-url.
func cliUpstream(c *cli.Context, args []string) (proxy.UpstreamConfig, error) {
	var up proxy.UpstreamConfig
	url := c.String("upstream-url")
	switch {
	case len(args) > 0 && url != "":
		return up, usageErrorf("give either -- COMMAND ARGS... or --upstream-url, not both")
	case len(args) == 0 && url == "":
		return up, usageErrorf("no upstream: give -- COMMAND ARGS... or --upstream-url URL")
	}
	up.URL, up.Command = url, args
	if len(args) > 0 {
		env, err := proxy.UpstreamEnv(c.StringSlice("env"), os.LookupEnv)
		if err != nil {
			return up, usageErrorf("%v", err)
		}
		up.Env = env
	}
	up.Stderr = c.App.ErrWriter
	up.ClientName, up.ClientVersion = "planlock", shortVersion()
	up.InitTimeout = c.Duration("timeout")
	return up, nil
}

func fetchTools(c *cli.Context, args []string) ([]json.RawMessage, proxy.UpstreamConfig, error) {
	up, err := cliUpstream(c, args)
	if err != nil {
		return nil, up, err
	}
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
	defer cancel()
	tools, err := proxy.FetchTools(ctx, up)
	if err != nil {
		return nil, up, failf("%v", err)
	}
	return tools, up, nil
}

func toolsCommand() *cli.Command {
	return &cli.Command{
		Name:      "tools",
		Usage:     "list an upstream MCP server's tools with their arguments",
		ArgsUsage: "[-- UPSTREAM_COMMAND ARGS...]",
		Flags: append(upstreamFlags(),
			&cli.BoolFlag{Name: "json", Usage: "print the raw tools/list result (input of plan validate --tools)"}),
		Action: func(c *cli.Context) error {
			raw, _, err := fetchTools(c, c.Args().Slice())
			if err != nil {
				return err
			}
			if c.Bool("json") {
				out, err := json.MarshalIndent(map[string]any{"tools": raw}, "", "  ")
				if err != nil {
					return failf("%v", err)
				}
				fmt.Fprintln(c.App.Writer, string(out))
				return nil
			}
			tools, err := catalog.Decode(raw)
			if err != nil {
				return failf("%v", err)
			}
			fmt.Fprint(c.App.Writer, catalog.List(tools))
			return nil
		},
	}
}

func planInitCommand() *cli.Command {
	return &cli.Command{
		Name:      "init",
		Usage:     "write a skeleton plan from an upstream's tools",
		ArgsUsage: "NAME -- UPSTREAM_COMMAND ARGS...",
		Flags: append(upstreamFlags(),
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write to `FILE` instead of stdout (refuses to overwrite)"}),
		Action: func(c *cli.Context) error {
			if c.NArg() < 1 {
				return usageErrorf("plan init needs a plan NAME")
			}
			name := c.Args().First()
			// The upstream command follows the name (and its "--").
			rest := c.Args().Tail()
			if len(rest) > 0 && rest[0] == "--" {
				rest = rest[1:]
			}
			tools, upc, err := fetchTools(c, rest)
			if err != nil {
				return err
			}
			decoded, err := catalog.Decode(tools)
			if err != nil {
				return failf("%v", err)
			}
			src := catalog.Skeleton(name, decoded, upc.Command, upc.URL, time.Now())
			if out := c.String("output"); out != "" {
				f, err := os.OpenFile(filepath.Clean(out), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
				if err != nil {
					return failf("%v", err)
				}
				if _, err := f.Write(src); err != nil {
					f.Close()
					return failf("write %s: %v", out, err)
				}
				return f.Close()
			}
			_, err = c.App.Writer.Write(src)
			return err
		},
	}
}
