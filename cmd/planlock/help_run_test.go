package main

import (
	"fmt"
	"strings"
	"testing"
)

// helpExampleRuns is the reviewed list of every --help example, in the
// order the documentation test runs them in its sandbox (doc_test.go); an
// example that cannot run there says why. TestHelpExampleList fails when
// an example is added to a --help text without a line here, or a line here
// names no example.
var helpExampleRuns = []struct{ ex, skip string }{
	{`planlock plan fmt                      # format ./*.hcl`, ""},
	{`planlock plan fmt --recursive plans/   # format plans/ and its subdirectories`, ""},
	{`planlock plan fmt --check --diff .     # CI: list and show what is not formatted`, ""},
	{`cat refund.hcl | planlock plan fmt -   # filter`, ""},
	{`planlock plan validate refund.hcl          # check a plan`, ""},
	{`planlock plan validate                 # check ./*.hcl`, ""},
	{`planlock plan validate refund.hcl`, ""},
	{`planlock plan validate --recursive plans/`, ""},
	{`planlock plan validate --json plans/*.hcl`, ""},
	{`planlock plan show refund.hcl`, ""},
	{`planlock plan test                     # test ./*.hcl`, ""},
	{`planlock plan test refund.hcl`, ""},
	{`planlock plan test --recursive plans/`, ""},
	{`planlock plan test --json refund.hcl`, ""},
	{`planlock plan suggest --from-audit audit.jsonl --name refund-4711`, "needs the audit log of an observed proxy (README's rollout example runs one)"},
	{`planlock plan suggest --from-audit audit.jsonl --plan refund.hcl --margin 20%`, "needs the audit log of an observed proxy (README's rollout example runs one)"},
	{`planlock plan show --json refund.hcl | jq '.steps[].tool'`, ""},
	{`planlock tools --json -- node server.js > tools.json`, "needs an MCP server as node server.js"},
	{`planlock plan validate --tools tools.json refund.hcl`, "needs the tools.json of the example before"},
	{`planlock tools -- npx -y @modelcontextprotocol/server-filesystem ~/docs`, ""},
	{`planlock tools --json --upstream-url http://127.0.0.1:3001/mcp > tools.json`, "needs an MCP server on port 3001"},
	{`planlock tools --pins -- npx -y @modelcontextprotocol/server-filesystem ~/docs`, ""},
	{`planlock plan init read-docs -o plans/read-docs.hcl -- npx -y @modelcontextprotocol/server-filesystem ~/docs`, ""},
	{`planlock plan init refund --expires 7d --upstream-url http://127.0.0.1:3001/mcp`, "needs an MCP server on port 3001"},
	{`planlock plan init triage --expires 2027-06-30T23:59:59Z -- node server.js > triage.hcl`, "needs an MCP server as node server.js"},
	{`planlock keygen --out-dir ~/.config/planlock`, ""},
	{`planlock keygen --out-dir ~/.planlock --name release --type ed25519`, ""},
	{`planlock keygen --state-key ~/.planlock/state.key`, ""},
	{`planlock sign --key ~/.config/planlock/planlock.key plans/refund.hcl`, ""},
	{`planlock verify --key ~/.config/planlock/planlock.pub plans/refund.hcl`, ""},
	{`planlock sign plans/refund.hcl                     # in the sign-on-merge workflow`, "keyless: needs GitHub Actions' OIDC token and the public-good sigstore"},
	{`VAULT_ADDR=https://vault.example:8200 planlock sign --key hashivault://planlock-ci plans/refund.hcl`, "needs a Vault server"},
	{`planlock sign --key planlock.key --kind hold --pr 18 holds/refund-4711/h1.hcl`, "needs a hold request the proxy wrote"},
	{`planlock sign --key planlock.key --trusted-root trusted_root.json plans/refund.hcl   # logged in its Rekor`, "needs a trusted root naming a reachable Rekor"},
	{`planlock sign --fulcio-url https://fulcio.example --rekor-url https://rekor.example plans/*.hcl`, "needs a private sigstore"},
	{`planlock verify plans/refund.hcl  --certificate-identity https://github.com/acme/plans/.github/workflows/sign.yml@refs/heads/main  --certificate-oidc-issuer https://token.actions.githubusercontent.com`, "needs a bundle signed in GitHub Actions and the public-good sigstore root (network)"},
	{`planlock verify --json --trusted-root trusted_root.json  --certificate-identity-regexp 'https://github\.com/acme/plans/\.github/workflows/sign\.yml@refs/heads/.+'  --certificate-oidc-issuer https://token.actions.githubusercontent.com  --certificate-github-workflow-ref refs/heads/main plans/*.hcl`, "needs a private sigstore's trusted root and keyless bundles"},
	{`planlock proxy --plan plans/refund.hcl --key planlock.pub`, "serves until stopped; needs the refund server (examples/refund: go build -o refund-server ./server)"},
	{`PLANLOCK_LISTEN_TOKEN=s3cret planlock proxy --plan plans/refund.hcl --key planlock.pub --listen 127.0.0.1:3001`, "serves until stopped; needs the refund server (examples/refund: go build -o refund-server ./server)"},
	{`planlock serve --plans plans --key planlock.pub --tokens tokens.txt --listen 127.0.0.1:8080`, "serves until stopped; needs a token file and plans with upstream blocks"},
	{`planlock mcp-config --client claude-code --plan plans/read-docs.hcl --key plan-signing.pub`, "needs plans/read-docs.hcl and its key (docs/getting-started.md runs the same command)"},
	{`planlock mcp-config --client vscode --write --plan plans/read-docs.hcl`, "writes into .vscode/mcp.json and needs a trust policy in the config file"},
	{`planlock mcp-config --client cursor --listen 127.0.0.1:3001 --plan plans/read-docs.hcl`, "needs plans/read-docs.hcl and a trust policy in the config file"},
	{`planlock holds reject 6f1c0d2a9b8e7f60`, "needs a hold"},
	{`planlock holds approve 6f1c0d2a9b8e7f60 --key ~/.config/planlock/approver.key`, "needs a hold"},
	{`planlock holds approve --state /var/lib/planlock/refund 6f1c0d2a9b8e7f60 --key hashivault://planlock`, "needs a hold and a Vault server"},
	{`planlock proxy --plan refund.hcl`, "serves until stopped; needs an operator config file with the trust policy"},
	{`planlock config show`, ""},
	{`planlock state migrate --state postgres://planlock@db.example/planlock`, "needs a PostgreSQL server (proxy/ledger/pgstate's tests start one)"},
	{`planlock state copy --from ~/.local/state/planlock/refund.hcl-3f9a0c41d2b7e655 --to postgres://planlock@db.example/planlock`, "needs a PostgreSQL server (cmd/planlock's state tests start one)"},
	{`planlock audit verify --state postgres://planlock@db.example/planlock`, "needs a PostgreSQL server (cmd/planlock's state tests start one)"},
	{`planlock config show proxy --listen :3001`, ""},
	{`planlock config show holds approve --config ./ops.hcl`, "needs ./ops.hcl"},
	{`planlock init github --owner @acme/plan-approvers`, "a development build needs --planlock-version (docs/approvals.md runs it with one)"},
	{`planlock init github --dir ../plans-repo --plans-glob 'agents/**/*.hcl' --branch release --planlock-version v0.4.0`, "needs a second repository next to this one"},
	{`planlock check-pr --base "$BASE_SHA" --head "$HEAD_SHA" --head-ref "$HEAD_REF"`, "runs in the workflow on a pull request's commits"},
	{`planlock doctor`, "needs a GitHub repository and token"},
	{`GH_TOKEN=$(gh auth token) planlock doctor --dir ../plans --branch main`, "needs gh and a GitHub repository"},
	{`planlock reconcile --out "$RUNNER_TEMP/bundles"  --certificate-identity https://github.com/acme/plans/.github/workflows/planlock.yml@refs/heads/main  --certificate-oidc-issuer https://token.actions.githubusercontent.com  --certificate-github-workflow-trigger push,schedule`, "keyless: runs in GitHub Actions with its OIDC token"},
	{`planlock reconcile --dry-run --key planlock.pub`, "needs an approvals branch on origin"},
	{`planlock reconcile --signing-key planlock.key --key planlock.pub --out bundles`, "needs an approvals branch on origin"},
	{`planlock approve plans/refund.hcl`, ""},
	{`planlock approve refund.hcl                 # open the approval pull request`, ""},
	{`planlock approve --base release plans/refund.hcl`, "needs a release branch"},
	{`GH_HOST=ghe.example.com planlock approve plans/refund.hcl`, "needs a GitHub Enterprise host"},
	{`planlock proxy --plan refund.hcl            # gate the agent's calls`, "serves until stopped; the first-hour test (TestFirstHour) runs it in examples/refund"},
	{`planlock holds list`, "needs the state of a proxy that ran"},
	{`planlock holds list --state /var/lib/planlock --json`, "reads a system state directory"},
	{`planlock holds show 6f1c0d2a9b8e7f60`, "needs a hold"},
	{`planlock holds show --json 6f1c0d2a9b8e7f60`, "needs a hold"},
	{`planlock audit verify ~/.local/state/planlock/audit.jsonl`, "needs the audit log of a proxy that ran"},
	{`planlock audit verify --anchor shipped-head.txt audit.jsonl`, "needs the audit log of a proxy that ran"},
	{`planlock audit verify --head 0f13b09a...7ae4 --json audit.jsonl`, "needs the audit log of a proxy that ran"},
	{`planlock audit verify --anchor /var/lib/planlock/refund-4711/head /var/lib/planlock/refund-4711/`, "reads a system state directory"},
	{`planlock audit export ~/.local/state/planlock/ > audit-export.jsonl`, "needs the audit log of a proxy that ran"},
	{`planlock audit export --from-seq 40001 /var/lib/planlock/refund-4711/`, "reads a system state directory"},
	{`planlock audit head`, "needs the state of a proxy that ran"},
	{`planlock audit head --state /var/lib/planlock >> /mnt/remote/planlock-heads.txt`, "reads a system state directory"},
	{`planlock audit head --state audit.jsonl --json`, "needs the audit log of a proxy that ran"},
	{`source <(planlock completion bash)     # in ~/.bashrc`, ""},
	{`planlock completion zsh > "${fpath[1]}/_planlock"`, "zsh's $fpath"},
	{`planlock completion fish > ~/.config/fish/completions/planlock.fish`, "writes into the user's fish configuration"},
}

func TestHelpExampleList(t *testing.T) {
	listed := map[string]bool{}
	for _, r := range helpExampleRuns {
		listed[r.ex] = true
	}
	found := map[string]bool{}
	for where, examples := range helpExamples(testApp()) {
		for _, ex := range examples {
			found[ex] = true
			if !listed[ex] {
				t.Errorf("%s --help: example %q is not in helpExampleRuns: add it, to run or with a reason to skip", where, ex)
			}
		}
	}
	for ex := range listed {
		if !found[ex] {
			t.Errorf("helpExampleRuns names %q, which no --help shows", ex)
		}
	}
}

// helpExampleScript is the testscript of the runnable help examples.
func helpExampleScript(t *testing.T) string {
	var script strings.Builder
	var files []string
	// The examples share ~/docs, which a reader of --help already has.
	script.WriteString("mkdir $HOME/docs\n")
	for i, r := range helpExampleRuns {
		if r.skip != "" {
			t.Logf("help example skipped (%s): %s", r.skip, r.ex)
			continue
		}
		name := fmt.Sprintf("help/%03d.sh", i)
		cond := ""
		if strings.Contains(r.ex, "| jq ") {
			cond = "[exec:jq] " // jq is not part of the toolchain the tests need
		}
		fmt.Fprintf(&script, "# %s\n%sexec bash -eo pipefail %s\n", r.ex, cond, name)
		files = append(files, fmt.Sprintf("-- %s --\n%s\n", name, r.ex))
	}
	return script.String() + strings.Join(files, "")
}
