package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/planlock/planlock/internal/settings"
)

// The operator's settings come, for every flag of every command, from (in
// this order) the command line, a PLANLOCK_<FLAG> environment variable, the
// operator's config file, and the flag's default (internal/settings). The
// config file is the operator's, never the plan author's: it is found in
// $XDG_CONFIG_HOME (or given with --config / PLANLOCK_CONFIG) and refused
// inside the plan's repository, since it holds the trust policy that
// decides which plans run.

// showRequest makes every command print its effective settings instead of
// running (planlock config show).
type showRequest struct {
	args []string // the command line being shown, to tell a flag from env
}

// applySettings gives every flag of cmds its environment variable and
// config key (internal/settings), adds --config to every command that
// runs, and wraps its action: the config file (refused inside the plan's
// repository) fills the flags nothing else set, then the trust flags'
// sources are resolved (trust_sources.go).
func applySettings(cmds []*cli.Command, show *showRequest) {
	o := settings.Options{Usage: usageErrorf, Guard: refuseConfigInPlanRepo, Before: resolveTrust}
	if show != nil {
		o.Show = func(c *cli.Context, cfg *settings.Config, sources map[string]settings.Source) error {
			return showSettings(c, cfg, sources, show.args) // config_cmd.go
		}
	}
	settings.Apply(cmds, o)
}

func hasFlag(flags []cli.Flag, name string) bool { return settings.HasFlag(flags, name) }
func skipFlag(f cli.Flag) bool                   { return settings.SkipFlag(f) }
func configKey(f cli.Flag) string                { return settings.ConfigKey(f) }
func takesFile(f cli.Flag) bool                  { return settings.TakesFile(f) }

// fromConfig reports whether the config file set the flag.
func fromConfig(c *cli.Context, name string) bool { return settings.FromConfig(c, name) }

// refuseConfigInPlanRepo refuses a config file inside the plan's directory or
// the Git checkout holding it: whoever can change the plans could otherwise
// choose whom the proxy trusts.
func refuseConfigInPlanRepo(c *cli.Context, configPath string) error {
	if !hasFlag(c.Command.Flags, "plan") || c.String("plan") == "" {
		return nil
	}
	planDir, err := filepath.Abs(filepath.Dir(c.String("plan")))
	if err != nil {
		return nil
	}
	guard := planDir
	for d := planDir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, ".git")); err == nil {
			guard = d
			break
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	if within(configPath, guard) {
		return usageErrorf("config file %s is inside the plan's repository or directory %s: the operator's configuration (its trust policy) must not come from where plans are written; move it to %s", configPath, guard, "$XDG_CONFIG_HOME/planlock/config.hcl")
	}
	return nil
}

func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}
