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
	"regexp"
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
this binary's exact version with this binary's Go version. A development
build needs --planlock-version or --from-source; a build from a Git checkout
(a pseudo-version, which go install finds only if that commit is public)
needs --planlock-version. --from-source builds the checked-out commit in
planlock's own repository, and elsewhere (a plans repository) checks out
planlock's source at this binary's commit and builds that.

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
		&cli.BoolFlag{Name: "from-source", Usage: "build planlock from source: the checked-out commit in planlock's own repository, else planlock's source at this binary's commit", Destination: &o.FromSource},
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

// build is what this binary knows of its own source: its module version
// ("(devel)" or "" for a development build; a pseudo-version for a build
// in a Git checkout, "+dirty" when it had changes) and its commit.
type build struct {
	Version, Revision string
	Modified          bool
}

func thisBuild() build {
	var b build
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.Version = bi.Main.Version
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// pseudoRE matches a Go pseudo-version (vX.Y.Z-[pre.0.|0.]yyyymmddhhmmss-
// <12 hex>): a commit, which go install finds only if it is public.
var pseudoRE = regexp.MustCompile(`[-.][0-9]{14}-([0-9a-f]{12})(\+incompatible)?$`)

// planlockModuleRE is the go.mod line of planlock's own repository.
var planlockModuleRE = regexp.MustCompile(`(?m)^module\s+github\.com/planlock/planlock\s*$`)

// installedPlanlock decides how the workflow gets planlock: the version it
// installs, or, built from source outside planlock's own repository
// (isPlanlockRepo false), the commit of planlock's source it checks out. It
// returns the line that tells the user which, and why it may not resolve;
// a choice no workflow can carry out is refused with the flag that fixes it.
func installedPlanlock(given string, fromSource, isPlanlockRepo bool, b build) (version, commit, note string, err error) {
	switch {
	case fromSource && given != "":
		return "", "", "", usageErrorf("init github: give --planlock-version or --from-source, not both")
	case fromSource && isPlanlockRepo:
		return "", "", "The workflow builds planlock from the repository's own checked-out commit (--from-source).", nil
	case fromSource && b.Revision == "":
		return "", "", "", usageErrorf("init github: --from-source outside planlock's repository builds planlock's source at this binary's commit, and this build records none: give --planlock-version vX.Y.Z")
	case fromSource && b.Modified:
		return "", "", "", usageErrorf("init github: --from-source: this planlock was built from commit %s with uncommitted changes, which no workflow can check out: commit and push them, or give --planlock-version vX.Y.Z", shortSHA(b.Revision))
	case fromSource:
		return "", b.Revision, fmt.Sprintf("The workflow checks out github.com/planlock/planlock at commit %s (this binary's) and builds it: that works only if the commit is public there.", b.Revision), nil
	case given != "":
		if m := pseudoRE.FindStringSubmatch(given); m != nil {
			return given, "", fmt.Sprintf("The workflow installs planlock %s (--planlock-version), a pseudo-version of commit %s: go install finds it only if that commit is public on github.com/planlock/planlock.", given, m[1]), nil
		}
		return given, "", fmt.Sprintf("The workflow installs planlock %s (--planlock-version).", given), nil
	}
	v := b.Version
	switch m := pseudoRE.FindStringSubmatch(strings.TrimSuffix(v, "+dirty")); {
	case v == "" || v == "(devel)":
		return "", "", "", usageErrorf("init github: this planlock is a development build, so the workflow cannot install the same version: give --planlock-version vX.Y.Z or --from-source")
	case strings.HasSuffix(v, "+dirty"):
		return "", "", "", usageErrorf("init github: this planlock was built from a Git checkout with uncommitted changes (%s), which no workflow can install: give --planlock-version vX.Y.Z", v)
	case m != nil:
		return "", "", "", usageErrorf("init github: this planlock was built from Git commit %s (%s), which go install finds only if that commit is public on github.com/planlock/planlock: give --planlock-version with a released vX.Y.Z (or with %s to pin it anyway)", m[1], v, v)
	}
	return v, "", fmt.Sprintf("The workflow installs planlock %s, this binary's version.", v), nil
}

// isPlanlockRepo says dir is planlock's own repository (its go.mod), where
// --from-source builds the checked-out commit.
func isPlanlockRepo(dir string) bool {
	b, err := boundedio.ReadFile(filepath.Join(dir, "go.mod"), boundedio.MaxConfigBytes)
	return err == nil && planlockModuleRE.Match(b)
}

func runInitGitHub(_ context.Context, o *initGitHubOptions) error {
	w := o.IO.out
	if len(o.Args) != 0 {
		return usageErrorf("init github: takes no arguments (use --dir)")
	}
	pv, commit, note, err := installedPlanlock(o.PlanlockVersion, o.FromSource, isPlanlockRepo(o.Dir), thisBuild())
	if err != nil {
		return err
	}
	wf, err := gitapprove.GitHubWorkflow(gitapprove.WorkflowOptions{
		PlansGlob: o.PlansGlob, HoldsGlob: o.HoldsGlob,
		Branch: o.Branch, Approvals: o.ApprovalsBranch,
		PlanlockVersion: pv, FromSource: o.FromSource, SourceCommit: commit,
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
	fmt.Fprintln(w, note)
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
