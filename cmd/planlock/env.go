package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// envVar is an environment variable a command reads other than through a
// flag's EnvVars (which urfave/cli lists with the flag).
type envVar struct{ name, use string }

// Shared groups of variables.
var (
	noColorEnv = envVar{"NO_COLOR", "set: diagnostics are never coloured"}
	githubEnv  = []envVar{
		{"GH_TOKEN", "GitHub token that pushes branches and opens pull requests; sent to GitHub hosts only, over https"},
		{"GITHUB_TOKEN", "used when GH_TOKEN is not set"},
		{"PLANLOCK_GIT_TOKEN", "token for an https Git remote that is not on a GitHub host"},
		{"GH_HOST", "GitHub Enterprise host of the remote (declares it GitHub)"},
		{"GITHUB_API_URL", "GitHub API base URL (GitHub Actions sets it)"},
		{"GITHUB_SERVER_URL", "GitHub web URL (GitHub Actions sets it)"},
	}
	upstreamEnv = []envVar{
		{"PATH", "finds the upstream command; passed to a stdio upstream"},
		{"HOME", "passed to a stdio upstream (with the variables --env or the plan names)"},
	}
	tufCacheEnv  = envVar{"XDG_CACHE_HOME", "default --tuf-cache is $XDG_CACHE_HOME/planlock/sigstore-tuf (else ~/.cache/...)"}
	xdgConfigEnv = envVar{"XDG_CONFIG_HOME", "the operator config file is $XDG_CONFIG_HOME/planlock/config.hcl (else ~/.config/...)"}
	stateEnv     = envVar{"XDG_STATE_HOME", "default --state is $XDG_STATE_HOME/planlock (else ~/.local/state/planlock)"}
	// pgEnv: libpq's variables, read for a postgres:// --state.
	pgEnv = []envVar{
		{"PGPASSWORD", "with --state postgres://...: the database password (better than in the URL)"},
		{"PGPASSFILE", "with --state postgres://...: the password file (default ~/.pgpass)"},
		{"PGSSLMODE", "with --state postgres://...: TLS mode when the URL gives none"},
	}
)

// commandEnv maps each command path to the variables it reads; each list
// lives next to its command.
func commandEnv() map[string][]envVar {
	return map[string][]envVar{
		"plan fmt":      {noColorEnv},
		"plan validate": {noColorEnv},
		"plan show":     {noColorEnv},
		"plan init":     upstreamEnv,
		"tools":         upstreamEnv,
		"approve":       approveEnv(),
		"sign":          signEnv(),
		"verify":        {tufCacheEnv},
		"proxy":         proxyEnv(),
		"serve":         serveEnv(),
		"holds list":    {stateEnv},
		"state migrate": pgEnv,
		"state copy":    pgEnv,
		"audit verify":  pgEnv,
		"audit export":  pgEnv,
		"holds show":    {stateEnv},
		"mcp-config": {xdgConfigEnv,
			{"APPDATA", "Windows: where --write finds Claude Desktop's configuration"}},
	}
}

// documentEnv appends an "Environment:" section to the help of every
// command that reads variables.
func documentEnv(cmds []*cli.Command, path string) {
	env := commandEnv()
	for _, c := range cmds {
		p := strings.TrimSpace(path + " " + c.Name)
		if vars := env[p]; len(vars) > 0 {
			var b strings.Builder
			b.WriteString(strings.TrimRight(c.Description, "\n"))
			if c.Description != "" {
				b.WriteString("\n\n")
			}
			b.WriteString("Environment:")
			for _, v := range vars {
				fmt.Fprintf(&b, "\n   %-31s %s", v.name, v.use)
			}
			c.Description = b.String()
		}
		documentEnv(c.Subcommands, p)
	}
}
