// Package gitapprove turns plans and holds into approval pull requests: it
// branches, commits, pushes and fetches with go-git (never the git command),
// and talks to the forge (GitHub) over its REST API.
//
// Approving a plan is Approve (used by "planlock approve"). Holds are for the
// proxy; a typical use:
//
//	repo, err := gitapprove.OpenCache(ctx, remoteURL, filepath.Join(stateDir, "git"),
//		gitapprove.Options{Token: token})
//	forge, _ := gitapprove.ForgeFor(repo, token, os.Getenv) // nil: Git only
//	holds := &gitapprove.Holds{Repo: repo, Forge: forge, Base: "main"}
//
//	// On a Hold: write the request, push it, open the PR, answer at once.
//	pr, err := holds.Open(ctx, &gitapprove.HoldRequest{...}, pinChangeOrNil)
//	// errors.Is(err, gitapprove.ErrUnavailable): block the call, keep the hold, retry later.
//	// pr.URL() goes into the message to the agent; keep pr.PR.Number.
//
//	// On the repeated identical call:
//	st, err := holds.Status(ctx, hold, prNumber)
//	switch st.State {
//	case gitapprove.HoldMerged: // verify st.Bundle over st.File with sign/,
//		// ParseHold(st.File) and check it binds to this call, consume once.
//	case gitapprove.HoldRejected: // blocked: do not retry
//	case gitapprove.HoldPending: // same message again (st.AwaitingSignature: CI is signing)
//	}
//
// Credentials: the token is held in memory, given to go-git as HTTP basic
// auth for https remotes and to the GitHub API as a bearer token; this
// package never starts a process of its own and never sets environment
// variables.
package gitapprove
