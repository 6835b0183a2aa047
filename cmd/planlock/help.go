package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"
)

// The root help groups commands by workflow, in this order.
const (
	catAuthor  = "Author a plan"
	catApprove = "Approve and sign"
	catRun     = "Run the agent"
	catInspect = "Inspect"
)

var categoryOrder = []string{catAuthor, catApprove, catRun, catInspect, ""}

func in(category string, c *cli.Command) *cli.Command {
	c.Category = category
	return c
}

// rootHelpTemplate is urfave's root help with the commands listed by
// workflow (urfave sorts categories by name, which reads backwards here).
func rootHelpTemplate() string {
	var b strings.Builder
	for _, cat := range categoryOrder {
		name := cat
		if name == "" {
			name = "Other"
		}
		fmt.Fprintf(&b, "\n\n   %s:", name)
		fmt.Fprintf(&b, `{{range .VisibleCommands}}{{if eq .Category %q}}
     {{join .Names ", "}}{{"\t"}}{{.Usage}}{{end}}{{end}}`, cat)
	}
	return strings.Replace(cli.AppHelpTemplate, `{{template "visibleCommandCategoryTemplate" .}}`, b.String(), 1)
}

// versionLine is what "planlock version" and "--version" print after
// "planlock version ": the module version and the VCS revision from the
// build info, and honestly what is missing (a "go build" in a checkout is
// "(devel)"; with -buildvcs=false there is no revision).
func versionLine() string {
	info, ok := debug.ReadBuildInfo()
	return formatVersion(version, info, ok)
}

// formatVersion is versionLine for a given -X version and build info.
func formatVersion(v string, info *debug.BuildInfo, ok bool) string {
	if v == "" && ok {
		v = info.Main.Version
	}
	if v == "" {
		v = "(devel)"
	}
	if !ok {
		return v + " (no build information)"
	}
	var rev, at, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	var parts []string
	switch {
	case rev != "":
		parts = append(parts, "commit "+shortSHA(rev))
		if at != "" {
			parts = append(parts, at)
		}
		if modified == "true" {
			parts = append(parts, "modified")
		}
	case strings.HasPrefix(v, "v"):
		// A tagged module version (go install ...@v1.2.3) names the source.
	default:
		parts = append(parts, "no VCS revision: built with -buildvcs=false or outside a Git checkout")
	}
	parts = append(parts, info.GoVersion)
	return v + " (" + strings.Join(parts, ", ") + ")"
}

// shortVersion is the version sent to MCP peers.
func shortVersion() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "(devel)"
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print planlock's version and the VCS revision it was built from",
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErrorf("version: unexpected argument %q", c.Args().First())
			}
			fmt.Fprintf(c.App.Writer, "planlock version %s\n", versionLine())
			return nil
		},
	}
}

// Completion scripts: each asks planlock itself for the candidates
// (urfave/cli's --generate-bash-completion), so they follow new commands.
const bashCompletion = `# bash completion for planlock; load with: source <(planlock completion bash)
_planlock_complete() {
  local cur words
  COMPREPLY=()
  cur="${COMP_WORDS[COMP_CWORD]}"
  words=("${COMP_WORDS[@]:0:COMP_CWORD}")
  local opts
  if [[ "$cur" == "-"* ]]; then
    opts=$("${words[@]}" "$cur" --generate-bash-completion 2>/dev/null)
  else
    opts=$("${words[@]}" --generate-bash-completion 2>/dev/null)
  fi
  COMPREPLY=($(compgen -W "${opts}" -- "${cur}"))
  return 0
}
complete -o bashdefault -o default -F _planlock_complete planlock
`

const zshCompletion = `#compdef planlock
# zsh completion for planlock; load with: source <(planlock completion zsh)
_planlock() {
  local -a opts
  local cur
  cur=${words[-1]}
  if [[ "$cur" == "-"* ]]; then
    opts=("${(@f)$(${words[@]:0:#words[@]-1} ${cur} --generate-bash-completion 2>/dev/null)}")
  else
    opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion 2>/dev/null)}")
  fi
  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}
compdef _planlock planlock
`

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash, zsh or fish)",
		ArgsUsage: "bash|zsh|fish",
		Description: `Examples:
   source <(planlock completion bash)     # in ~/.bashrc
   planlock completion zsh > "${fpath[1]}/_planlock"
   planlock completion fish > ~/.config/fish/completions/planlock.fish`,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageErrorf("completion: give one shell: bash, zsh or fish")
			}
			switch sh := c.Args().First(); sh {
			case "bash":
				fmt.Fprint(c.App.Writer, bashCompletion)
			case "zsh":
				fmt.Fprint(c.App.Writer, zshCompletion)
			case "fish":
				script, err := c.App.ToFishCompletion()
				if err != nil {
					return failf("completion: %v", err)
				}
				fmt.Fprint(c.App.Writer, script)
			default:
				return usageErrorf("completion: unknown shell %q: give bash, zsh or fish", sh)
			}
			return nil
		},
	}
}
