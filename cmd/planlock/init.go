package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/planlock/planlock/gitapprove"
	"github.com/planlock/planlock/internal/boundedio"
	"github.com/urfave/cli/v2"
)

// writeTrustBlock prints the operator config that trusts what the workflow
// signs: its keyless identity on the protected branch. The repository comes
// from the checkout's origin when there is one.
func writeTrustBlock(w io.Writer, dir, branch string) {
	repo := "OWNER/REPO"
	note := "  # replace OWNER/REPO with the repository on GitHub"
	if r, err := gitapprove.Open(dir, gitapprove.Options{}); err == nil {
		if u, err := r.RemoteURL(); err == nil {
			if rr, err := gitapprove.ParseRemoteURL(u); err == nil && rr.Host == "github.com" {
				repo, note = rr.Owner+"/"+rr.Name, ""
			}
		}
	}
	fmt.Fprintf(w, `
Trust what this workflow signs: put this in the operator config of every
machine that runs planlock proxy ($XDG_CONFIG_HOME/planlock/config.hcl,
default ~/.config/planlock/config.hcl; see planlock config):

certificate_identity    = "https://github.com/%s/%s@refs/heads/%s"%s
certificate_oidc_issuer = "https://token.actions.githubusercontent.com"
certificate_github_workflow_trigger = "push,schedule"
`, repo, gitapprove.WorkflowPath, branch, note)
}

func initCommand() *cli.Command {
	o := &initGitHubOptions{}
	return &cli.Command{
		Name:  "init",
		Usage: "set a repository up for planlock approvals",
		Subcommands: []*cli.Command{
			{
				Name:  "github",
				Usage: "write the GitHub Actions workflow: validate on pull request, sign on merge",
				Description: `Writes .github/workflows/planlock.yml, the branch ruleset
.github/planlock-ruleset.json, and with --owner a CODEOWNERS stanza.

The workflow: on every pull request the "planlock check" job refuses a hold
pull request that changes more than its hold (planlock check-pr), runs "plan
fmt --check" and "plan validate", and posts (or updates its own) "plan show"
summary comment. On every push to the protected branch, and hourly as a
safety net, the "sign" job (OIDC token, read-only repository token) runs
planlock reconcile: it signs keyless every plan and hold file whose exact
bytes have no valid bundle on the planlock/approvals branch yet; the
"publish" job (write token, no OIDC token, no third-party code) pushes the
bundles there. Actions are pinned by commit SHA; planlock is installed at
this binary's exact version (a development build needs --planlock-version or
--from-source) with this binary's Go version.

The ruleset (import it in the repository settings) requires a pull request
with a code owner's approval, dismisses stale approvals, requires approval
of the most recent push and the "planlock check" check, and lets nobody
bypass it. See docs/approvals.md.

Examples:
   planlock init github --owner @acme/plan-approvers
   planlock init github --dir ../plans-repo --plans-glob 'agents/**/*.hcl' --branch release --planlock-version v0.4.0`,
				Flags:  o.flags(),
				Action: action(o, runInitGitHub),
			},
		},
	}
}

// initGitHubOptions are the flags of planlock init github.
type initGitHubOptions struct {
	cmdline
	Dir             string
	PlansGlob       string
	HoldsGlob       string
	Branch          string
	ApprovalsBranch string
	PlanlockVersion string
	FromSource      bool
	GoVersion       string
	Owner           cli.StringSlice
	Force           bool
}

func (o *initGitHubOptions) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "dir", Value: ".", Usage: "repository root to write into", Destination: &o.Dir},
		&cli.StringFlag{Name: "plans-glob", Value: "plans/**/*.hcl", Usage: "plan files (GitHub paths filter and bash globstar syntax)", Destination: &o.PlansGlob},
		&cli.StringFlag{Name: "holds-glob", Value: "holds/**/*.hcl", Usage: "hold request files", Destination: &o.HoldsGlob},
		&cli.StringFlag{Name: "branch", Value: "main", Usage: "the protected branch approvals are merged into", Destination: &o.Branch},
		&cli.StringFlag{Name: "approvals-branch", Value: gitapprove.DefaultApprovalsBranch, Usage: "branch the workflow publishes bundles on", Destination: &o.ApprovalsBranch},
		&cli.StringFlag{Name: "planlock-version", Usage: "exact planlock `VERSION` (vX.Y.Z) the workflow installs (default: this binary's version)", Destination: &o.PlanlockVersion},
		&cli.BoolFlag{Name: "from-source", Usage: "build planlock from the checked-out repository at the same commit (for the planlock repository itself)", Destination: &o.FromSource},
		&cli.StringFlag{Name: "go-version", Value: defaultGoVersion(), Usage: "exact Go `VERSION` for actions/setup-go", Destination: &o.GoVersion},
		&cli.StringSliceFlag{Name: "owner", Usage: "code `OWNER` (@org/team, @user) of plans, holds and workflows in CODEOWNERS (repeatable; without it no CODEOWNERS is written)", Destination: &o.Owner},
		&cli.BoolFlag{Name: "force", Usage: "overwrite a workflow file that differs", Destination: &o.Force},
	}
}

// defaultGoVersion pins the workflow to the Go release this binary was
// built with ("go1.26.8" → "1.26.8").
func defaultGoVersion() string {
	v := strings.TrimPrefix(runtime.Version(), "go")
	if i := strings.IndexAny(v, " -+"); i >= 0 {
		v = v[:i]
	}
	return v
}

// buildVersion is the module version of this binary, "(devel)" or "" for
// a development build (go build in a checkout).
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Version
	}
	return ""
}

func runInitGitHub(_ context.Context, o *initGitHubOptions) error {
	w := o.IO.out
	if len(o.Args) != 0 {
		return usageErrorf("init github: takes no arguments (use --dir)")
	}
	pv := o.PlanlockVersion
	if pv == "" && !o.FromSource {
		pv = buildVersion()
		if pv == "" || pv == "(devel)" {
			return usageErrorf("init github: this planlock is a development build, so the workflow cannot install the same version: give --planlock-version vX.Y.Z or --from-source")
		}
	}
	wf, err := gitapprove.GitHubWorkflow(gitapprove.WorkflowOptions{
		PlansGlob: o.PlansGlob, HoldsGlob: o.HoldsGlob,
		Branch: o.Branch, Approvals: o.ApprovalsBranch,
		PlanlockVersion: pv, FromSource: o.FromSource,
		GoVersion: o.GoVersion,
	})
	if err != nil {
		return usageErrorf("init github: %v", err)
	}
	ruleset, err := gitapprove.Ruleset(o.Branch)
	if err != nil {
		return usageErrorf("init github: %v", err)
	}
	var stanza string
	if owners := o.Owner.Value(); len(owners) > 0 {
		if stanza, err = gitapprove.CodeownersStanza(o.PlansGlob, o.HoldsGlob, owners); err != nil {
			return usageErrorf("init github: %v", err)
		}
	}
	dir := o.Dir
	path := filepath.Join(dir, filepath.FromSlash(gitapprove.WorkflowPath))
	old, err := boundedio.ReadFile(path, boundedio.MaxConfigBytes)
	switch {
	case err == nil && bytes.Equal(old, wf):
		fmt.Fprintf(w, "%s is up to date.\n", path)
	case err == nil && !o.Force:
		return failf("init github: %s exists and differs; use --force to overwrite it", path)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return failf("init github: %v", err)
	default:
		if err := writeRepoFile(path, wf); err != nil {
			return failf("init github: %v", err)
		}
		fmt.Fprintf(w, "Wrote %s.\n", path)
	}
	rpath := filepath.Join(dir, filepath.FromSlash(gitapprove.RulesetPath))
	if err := writeRepoFile(rpath, ruleset); err != nil {
		return failf("init github: %v", err)
	}
	fmt.Fprintf(w, "Wrote %s: import it as a branch ruleset (Settings → Rules → Rulesets → New ruleset → Import a ruleset).\n", rpath)
	if stanza != "" {
		cpath := filepath.Join(dir, filepath.FromSlash(gitapprove.CodeownersPath))
		cur, err := boundedio.ReadFile(cpath, boundedio.MaxConfigBytes)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return failf("init github: %v", err)
		}
		if !bytes.Contains(cur, []byte(gitapprove.CodeownersMarker)) {
			if len(cur) > 0 && !bytes.HasSuffix(cur, []byte("\n")) {
				cur = append(cur, '\n')
			}
			if err := writeRepoFile(cpath, append(cur, stanza...)); err != nil {
				return failf("init github: %v", err)
			}
			fmt.Fprintf(w, "Wrote the planlock stanza into %s.\n", cpath)
		} else {
			fmt.Fprintf(w, "%s already has the planlock stanza.\n", cpath)
		}
	} else {
		fmt.Fprintf(w, "No --owner given: add code owners for %s, %s and .github/workflows/** to %s yourself.\n", o.PlansGlob, o.HoldsGlob, gitapprove.CodeownersPath)
	}
	fmt.Fprintf(w, "Commit them, import the ruleset for %s, and see docs/approvals.md.\n", o.Branch)
	fmt.Fprintln(w, initTrustFlags(o.Branch))
	writeTrustBlock(w, dir, o.Branch)
	return nil
}

// writeRepoFile writes a generated file, creating its directory.
func writeRepoFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// initTrustFlags is the trust policy for the bundles the workflow signs:
// its identity on the protected branch, run by a push (a merge), never by a
// pull request event.
func initTrustFlags(branch string) string {
	return "Trust its approvals in planlock verify and planlock proxy with:\n" +
		"  --certificate-identity https://github.com/OWNER/REPO/" + gitapprove.WorkflowPath + "@refs/heads/" + branch + " \\\n" +
		"  --certificate-oidc-issuer https://token.actions.githubusercontent.com \\\n" +
		"  --certificate-github-workflow-trigger push,schedule"
}
