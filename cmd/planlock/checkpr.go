package main

import (
	"context"
	"fmt"
	"regexp"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/planlock/planlock/gitapprove"
	"github.com/urfave/cli/v2"
)

var shaRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

func checkPRCommand() *cli.Command {
	o := &checkPROptions{}
	return &cli.Command{
		Name:  "check-pr",
		Usage: "refuse a hold pull request that changes more than its hold",
		Description: `Compares --head with its merge base with --base, as GitHub shows a pull
request. A hold pull request (branch planlock/hold/<plan>/<id>) must add
exactly its own hold file, a valid hold request for that plan and id, and may
change one plan file only by setting that hold's step pin to the observed
value and, for a changed tool definition, the tool_pin of the hold's tool to
a definition the plan records, byte for byte as planlock writes them. Any
other pull request must leave
hold files alone. The workflow runs it as the required "planlock check".

Examples:
   planlock check-pr --base "$BASE_SHA" --head "$HEAD_SHA" --head-ref "$HEAD_REF"

Exit status: 0 when the pull request passes, 1 when it does not, 2 on usage errors.`,
		Flags:  o.flags(),
		Action: action(o, runCheckPR),
	}
}

// checkPROptions are the flags of planlock check-pr.
type checkPROptions struct {
	cmdline
	Dir       string
	Base      string
	Head      string
	HeadRef   string
	PlansGlob string
	HoldsGlob string
}

func (o *checkPROptions) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "dir", Value: ".", Usage: "the checkout (both commits must be fetched)", TakesFile: true, Destination: &o.Dir},
		&cli.StringFlag{Name: "base", Usage: "the base branch commit `SHA`", Destination: &o.Base},
		&cli.StringFlag{Name: "head", Usage: "the pull request head commit `SHA`", Destination: &o.Head},
		&cli.StringFlag{Name: "head-ref", Usage: "the pull request's branch `NAME`", Destination: &o.HeadRef},
		&cli.StringFlag{Name: "plans-glob", Value: "plans/**/*.hcl", Usage: "plan files", Destination: &o.PlansGlob},
		&cli.StringFlag{Name: "holds-glob", Value: "holds/**/*.hcl", Usage: "hold request files", Destination: &o.HoldsGlob},
	}
}

func runCheckPR(_ context.Context, o *checkPROptions) error {
	if len(o.Args) != 0 {
		return usageErrorf("check-pr: takes no arguments")
	}
	for _, f := range []struct{ name, sha string }{{"base", o.Base}, {"head", o.Head}} {
		if !shaRE.MatchString(f.sha) {
			return usageErrorf("check-pr: --%s must be a full commit SHA (40 lowercase hex digits)", f.name)
		}
	}
	if o.HeadRef == "" {
		return usageErrorf("check-pr: give --head-ref, the pull request's branch")
	}
	repo, err := gitapprove.Open(o.Dir, gitapprove.Options{})
	if err != nil {
		return failf("check-pr: %v", err)
	}
	changes, err := repo.PRChanges(plumbing.NewHash(o.Base), plumbing.NewHash(o.Head))
	if err != nil {
		return failf("check-pr: %v", err)
	}
	if err := gitapprove.CheckPR(o.HeadRef, changes, o.PlansGlob, o.HoldsGlob); err != nil {
		return failf("check-pr: %v", err)
	}
	fmt.Fprintf(o.IO.out, "%s: %s changed, allowed.\n", o.HeadRef, plural(len(changes), "file", "files"))
	return nil
}
