package main

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/planlock/planlock/internal/settings"
)

func configCommand() *cli.Command {
	return &cli.Command{
		Name:  "config",
		Usage: "show the operator settings a command runs with, and where each comes from",
		Description: `Every flag of every command can also be set by an environment variable,
PLANLOCK_ and the flag's name in capitals with _ for - (--state-root is
PLANLOCK_STATE_ROOT), or in the operator's config file, by the same name in
lower case without the prefix (state_root). The command line wins over the
environment, which wins over the config file, which wins over the default.

The config file is $XDG_CONFIG_HOME/planlock/config.hcl (default
~/.config/planlock/config.hcl), or the file named by --config or
PLANLOCK_CONFIG. It is never looked for next to a plan, and one inside the
plan's directory or Git checkout is refused: it holds the trust policy,
which must not come from where plans are written. Relative file names in it
are relative to the file itself. An error in it stops the command with
file:line:col and exit status 2.

   # ~/.config/planlock/config.hcl
   key        = "plan-signing.pub"       # trust plans signed with this key, or:
   # certificate_identity    = "https://github.com/acme/plans/.github/workflows/planlock.yml@refs/heads/main"
   # certificate_oidc_issuer = "https://token.actions.githubusercontent.com"
   state_root = "/var/lib/planlock"      # one state directory per plan under it
   listen     = "127.0.0.1:3001"         # proxy: serve HTTP on it
   token_file = "/etc/planlock/token"    # its bearer token
   plans_repo = "/srv/plans"             # the plans' Git checkout (hold pull requests)`,
		Subcommands: []*cli.Command{
			{
				Name:      "show",
				Usage:     "print the effective settings of a command (default: proxy) and their sources",
				ArgsUsage: "[COMMAND [SUBCOMMAND] [FLAGS...]]",
				Description: `Parses the command line given as that command would, without running it,
and prints each setting with its source: flag, env NAME, config FILE:LINE:COL
or default.

Examples:
   planlock config show
   planlock config show proxy --listen :3001
   planlock config show holds approve --config ./ops.hcl`,
				SkipFlagParsing: true,
				Action: func(c *cli.Context) error {
					args := c.Args().Slice()
					if len(args) == 0 || strings.HasPrefix(args[0], "-") {
						args = append([]string{"proxy"}, args...)
					}
					if args[0] == "config" {
						return usageErrorf("config show: give the command to show, e.g. proxy")
					}
					return runShow(c, args)
				},
			},
		},
	}
}

// runShow runs the named command in show mode: it parses its flags and
// applies the settings exactly as a real run does, then prints them.
func runShow(c *cli.Context, args []string) error {
	cmds := commands()
	applySettings(cmds, &showRequest{args: args})
	found := false
	for _, cmd := range cmds {
		if cmd.HasName(args[0]) {
			found = true
		}
	}
	if !found {
		return usageErrorf("config show: unknown command %q", args[0])
	}
	app := &cli.App{
		Name: "planlock", Reader: c.App.Reader, Writer: c.App.Writer, ErrWriter: c.App.ErrWriter,
		HideHelpCommand: true,
		ExitErrHandler:  func(*cli.Context, error) {},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return usageErrorf("%v", err)
		},
		Commands: cmds,
	}
	return app.RunContext(c.Context, append([]string{"planlock"}, args...))
}

func showSettings(c *cli.Context, cfg *settings.Config, sources map[string]settings.Source, args []string) error {
	w := c.App.Writer
	switch {
	case cfg.Path != "":
		fmt.Fprintf(w, "config file: %s\n", cfg.Path)
	default:
		p, err := settings.DefaultPath()
		if err != nil {
			p = "$XDG_CONFIG_HOME/planlock/config.hcl"
		}
		fmt.Fprintf(w, "config file: none (%s does not exist)\n", p)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "SETTING\tVALUE\tSOURCE\n")
	for _, f := range c.Command.Flags {
		if skipFlag(f) {
			continue
		}
		name := f.Names()[0]
		fmt.Fprintf(tw, "--%s\t%s\t%s\n", name, flagValue(c, f), sourceOf(f, sources, args))
	}
	return tw.Flush()
}

func flagValue(c *cli.Context, f cli.Flag) string {
	name := f.Names()[0]
	var v string
	if _, ok := f.(*cli.StringSliceFlag); ok {
		v = strings.Join(c.StringSlice(name), ",")
	} else {
		v = fmt.Sprint(c.Value(name))
	}
	if v == "" {
		return "-"
	}
	return v
}

func sourceOf(f cli.Flag, sources map[string]settings.Source, args []string) string {
	name := f.Names()[0]
	if s, ok := sources[name]; ok {
		return s.Kind + " " + s.Where
	}
	if flagGiven(args, f.Names()) {
		return "flag"
	}
	if f.IsSet() { // urfave marks a flag set from its environment variable
		if ev, ok := f.(interface{ GetEnvVars() []string }); ok {
			for _, e := range ev.GetEnvVars() {
				if _, set := os.LookupEnv(e); set {
					return "env " + e
				}
			}
		}
		return "env"
	}
	return "default"
}

// flagGiven reports whether the command line names the flag before "--".
func flagGiven(args []string, names []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		for _, n := range names {
			for _, p := range []string{"-" + n, "--" + n} {
				if a == p || strings.HasPrefix(a, p+"=") {
					return true
				}
			}
		}
	}
	return false
}
