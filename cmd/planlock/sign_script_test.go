package main

import (
	"os"
	"path/filepath"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/planlock/planlock/internal/testkit/sigstoretest"
)

// setupSigstore gives each script an in-process fake Fulcio, Rekor and TSA (the
// real services cannot run offline; see package sigstoretest for what is
// faithful), its trusted_root.json at $WORK/trusted_root.json, and OIDC
// tokens for several GitHub Actions identities:
//
//	$FULCIO_URL $REKOR_URL $TSA_URL $IDENTITY
//	$TOKEN_MAIN          acme/plans, .github/workflows/sign.yml, refs/heads/main
//	$TOKEN_BRANCH        same workflow on refs/heads/feature
//	$TOKEN_OTHER_REPO    acme/other
//	$TOKEN_OTHER_WF      acme/plans, .github/workflows/evil.yml
//	$TOKEN_OTHER_ISSUER  acme/plans main, issued by https://accounts.example.com
//	$TOKEN_EVIL          acme/plans-evil
//	$TOKEN_PR_TARGET     acme/plans main, triggered by pull_request_target
//	$GITHUB_SHA_MAIN     the commit every token names
func setupSigstore(env *testscript.Env) error {
	fs, err := sigstoretest.New()
	if err != nil {
		return err
	}
	env.Defer(fs.Close)
	tr, err := fs.TrustedRootJSON()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(env.WorkDir, "trusted_root.json"), tr, 0o644); err != nil {
		return err
	}
	const wf, main = ".github/workflows/sign.yml", "refs/heads/main"
	good := sigstoretest.GitHub("acme/plans", wf, main)
	otherIssuer := good
	otherIssuer.Issuer = "https://accounts.example.com"
	env.Setenv("FULCIO_URL", fs.Fulcio.URL)
	env.Setenv("REKOR_URL", fs.Rekor.URL)
	env.Setenv("TSA_URL", fs.TSA.URL)
	env.Setenv("IDENTITY", good.Identity())
	env.Setenv("TOKEN_MAIN", good.Token())
	env.Setenv("TOKEN_BRANCH", sigstoretest.GitHub("acme/plans", wf, "refs/heads/feature").Token())
	env.Setenv("TOKEN_OTHER_REPO", sigstoretest.GitHub("acme/other", wf, main).Token())
	env.Setenv("TOKEN_OTHER_WF", sigstoretest.GitHub("acme/plans", ".github/workflows/evil.yml", main).Token())
	env.Setenv("TOKEN_OTHER_ISSUER", otherIssuer.Token())
	env.Setenv("TOKEN_EVIL", sigstoretest.GitHub("acme/plans-evil", wf, main).Token())
	prTarget := good
	prTarget.EventName = "pull_request_target"
	env.Setenv("TOKEN_PR_TARGET", prTarget.Token())
	env.Setenv("GITHUB_SHA_MAIN", sigstoretest.GitHubSHA)
	return nil
}
