// Package gitapprove turns plans and holds into approval pull requests: it
// branches, commits, pushes and fetches with go-git (never the git command),
// and talks to the forge (GitHub) over its REST API.
//
// Approving a plan is Approve (used by "planlock approve"). Holds are for the
// proxy; a typical use:
//
//	creds := gitapprove.CredentialsFromEnv(os.Getenv)
//	repo, err := gitapprove.OpenCache(ctx, remoteURL, filepath.Join(stateDir, "git"),
//		gitapprove.Options{Credentials: creds})
//	forge, _ := gitapprove.ForgeFor(repo, creds) // nil: Git only
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
// Credentials: tokens are held in memory; Credentials decides where each
// goes (the GitHub token to GitHub hosts over https only, as basic auth to
// go-git and as a bearer token to the API; PLANLOCK_GIT_TOKEN to other https
// Git hosts). NewForge (forgeFor for an opened Repo) is the one place a
// forge client is made, and refuses a token that would go over plain http.
// This package never starts a process of its own and never sets environment
// variables.
//
// # Public API
//
// gitapprove is one of planlock's four public packages (with hclplan, sign
// and proxy): cmd/planlock opens plan approval pull requests (Approve),
// writes hold request files and opens, reads and retires their pull requests
// (Holds), and writes the signing workflow (GitHubWorkflow) with it. What a plan
// change means in plain words is hclplan/plandiff's; the fake GitHub API
// for tests is internal/testkit/githubtest.
package gitapprove
