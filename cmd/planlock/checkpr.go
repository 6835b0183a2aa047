package main

import (
	"fmt"
	"regexp"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/planlock/planlock/gitapprove"
	"github.com/urfave/cli/v2"
)

var shaRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

func checkPRCommand() *cli.Command {
	return &cli.Command{
		Name:  "check-pr",
		Usage: "refuse a hold pull request that changes more than its hold",
		Description: `Compares --head with its merge base with --base, as GitHub shows a pull
request. A hold pull request (branch planlock/hold/<plan>/<id>) must add
exactly its own hold file, a valid hold request for that plan and id, and may
change one plan file only by setting that hold's step pin to the observed
value, byte for byte as planlock writes it. Any other pull request must leave
hold files alone. The workflow runs it as the required "planlock check".

Examples:
   planlock check-pr --base "$BASE_SHA" --head "$HEAD_SHA" --head-ref "$HEAD_REF"

Exit status: 0 when the pull request passes, 1 when it does not, 2 on usage errors.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Value: ".", Usage: "the checkout (both commits must be fetched)", TakesFile: true},
			&cli.StringFlag{Name: "base", Usage: "the base branch commit `SHA`"},
			&cli.StringFlag{Name: "head", Usage: "the pull request head commit `SHA`"},
			&cli.StringFlag{Name: "head-ref", Usage: "the pull request's branch `NAME`"},
			&cli.StringFlag{Name: "plans-glob", Value: "plans/**/*.hcl", Usage: "plan files"},
			&cli.StringFlag{Name: "holds-glob", Value: "holds/**/*.hcl", Usage: "hold request files"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return usageErrorf("check-pr: takes no arguments")
			}
			for _, f := range []string{"base", "head"} {
				if !shaRE.MatchString(c.String(f)) {
					return usageErrorf("check-pr: --%s must be a full commit SHA (40 lowercase hex digits)", f)
				}
			}
			if c.String("head-ref") == "" {
				return usageErrorf("check-pr: give --head-ref, the pull request's branch")
			}
			repo, err := gitapprove.Open(c.String("dir"), gitapprove.Options{})
			if err != nil {
				return failf("check-pr: %v", err)
			}
			changes, err := repo.PRChanges(plumbing.NewHash(c.String("base")), plumbing.NewHash(c.String("head")))
			if err != nil {
				return failf("check-pr: %v", err)
			}
			if err := gitapprove.CheckPR(c.String("head-ref"), changes, c.String("plans-glob"), c.String("holds-glob")); err != nil {
				return failf("check-pr: %v", err)
			}
			fmt.Fprintf(c.App.Writer, "%s: %s changed, allowed.\n", c.String("head-ref"), plural(len(changes), "file", "files"))
			return nil
		},
	}
}
