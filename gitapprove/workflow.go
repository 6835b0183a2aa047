package gitapprove

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"text/template"
)

// WorkflowOptions shapes the GitHub Actions workflow planlock init github writes.
type WorkflowOptions struct {
	// PlansGlob selects plan files, e.g. "plans/**/*.hcl".
	PlansGlob string
	// HoldsGlob selects hold request files; "holds/**/*.hcl" when empty.
	HoldsGlob string
	// Branch is the protected branch merges land on; "main" when empty.
	Branch string
	// Approvals is the branch CI publishes bundles on; DefaultApprovalsBranch when empty.
	Approvals string
	// PlanlockVersion is the module version go install fetches ("latest" when
	// empty). FromSource builds ./cmd/planlock from the checkout instead (for
	// the planlock repository itself).
	PlanlockVersion string
	FromSource      bool
	// GoVersion for actions/setup-go; "stable" when empty.
	GoVersion string
}

// WorkflowPath is where the workflow goes in a repository.
const WorkflowPath = ".github/workflows/planlock.yml"

var (
	globRE    = regexp.MustCompile(`^[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.*\-]+)*$`)
	branchRE  = regexp.MustCompile(`^[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*$`)
	versionRE = regexp.MustCompile(`^(latest|v[0-9]+\.[0-9]+\.[0-9]+([.\-+][A-Za-z0-9.\-]+)?)$`)
	goVerRE   = regexp.MustCompile(`^(stable|oldstable|[0-9]+\.[0-9]+(\.[0-9]+)?)$`)
)

// These values go into YAML and shell: only plain characters are accepted,
// so nothing needs quoting and nothing can inject.
func (o *WorkflowOptions) normalize() error {
	if o.HoldsGlob == "" {
		o.HoldsGlob = "holds/**/*.hcl"
	}
	if o.Branch == "" {
		o.Branch = "main"
	}
	if o.Approvals == "" {
		o.Approvals = DefaultApprovalsBranch
	}
	if o.PlanlockVersion == "" {
		o.PlanlockVersion = "latest"
	}
	if o.GoVersion == "" {
		o.GoVersion = "stable"
	}
	for _, g := range []struct{ name, v string }{{"plans glob", o.PlansGlob}, {"holds glob", o.HoldsGlob}} {
		if !globRE.MatchString(g.v) || strings.Contains(g.v, "..") || !strings.HasSuffix(g.v, ".hcl") {
			return fmt.Errorf("%s %q: want a relative path pattern like plans/**/*.hcl (letters, digits, . _ - / *; ending in .hcl)", g.name, g.v)
		}
	}
	for _, b := range []struct{ name, v string }{{"branch", o.Branch}, {"approvals branch", o.Approvals}} {
		if !branchRE.MatchString(b.v) || strings.Contains(b.v, "..") || strings.HasSuffix(b.v, ".lock") {
			return fmt.Errorf("invalid %s %q", b.name, b.v)
		}
	}
	if o.Branch == o.Approvals {
		return fmt.Errorf("the approvals branch must not be the protected branch %q", o.Branch)
	}
	if !versionRE.MatchString(o.PlanlockVersion) {
		return fmt.Errorf("invalid planlock version %q: want latest or vX.Y.Z", o.PlanlockVersion)
	}
	if !goVerRE.MatchString(o.GoVersion) {
		return fmt.Errorf("invalid Go version %q", o.GoVersion)
	}
	return nil
}

// GitHubWorkflow renders the workflow: on pull requests touching plans it
// formats-checks and validates them and comments the summary; on pushes to
// the protected branch it signs changed plans and merged holds keyless and
// publishes the bundles on the approvals branch, beside each file's path.
func GitHubWorkflow(o WorkflowOptions) ([]byte, error) {
	if err := o.normalize(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := workflowTmpl.Execute(&b, o); err != nil {
		return nil, fmt.Errorf("render workflow: %w", err)
	}
	return b.Bytes(), nil
}

var workflowTmpl = template.Must(template.New("wf").Delims("[[", "]]").Parse(`# Written by "planlock init github". Approvals travel as pull requests:
#  - a pull request that touches plans gets "plan fmt --check", "plan validate",
#    "plan test" and the "plan show" summary with the test results as a comment;
#  - a push to [[.Branch]] (a merge) signs every changed plan and merged hold
#    request keyless (GitHub OIDC -> Fulcio -> Rekor) and publishes each bundle
#    as <file>.sigstore.json on the [[.Approvals]] branch, which only this
#    workflow writes. That branch is transport only: the proxy trusts a
#    bundle because its signature verifies against its trust policy.
name: planlock

on:
  pull_request:
    paths:
      - "[[.PlansGlob]]"
      - "[[.HoldsGlob]]"
  push:
    branches:
      - "[[.Branch]]"
    paths:
      - "[[.PlansGlob]]"
      - "[[.HoldsGlob]]"

permissions: {}

jobs:
  check:
    name: Check plans
    if: github.event_name == 'pull_request'
    runs-on: ubuntu-latest
    timeout-minutes: 15
    permissions:
      contents: read
      pull-requests: write
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0
          persist-credentials: false
      - uses: actions/setup-go@v5
        with:
          go-version: "[[.GoVersion]]"
          cache: false
      - name: Install planlock
        run: [[if .FromSource]]go build -o "$RUNNER_TEMP/bin/planlock" ./cmd/planlock && echo "$RUNNER_TEMP/bin" >> "$GITHUB_PATH"[[else]]go install github.com/planlock/planlock/cmd/planlock@[[.PlanlockVersion]][[end]]
      - name: Format and validate
        run: |
          shopt -s globstar nullglob
          plans=([[.PlansGlob]])
          if [ "${#plans[@]}" -eq 0 ]; then
            echo "no plan files match [[.PlansGlob]]"
            exit 0
          fi
          planlock plan fmt --check "${plans[@]}"
          planlock plan validate "${plans[@]}"
      - name: Test plans
        run: |
          shopt -s globstar nullglob
          plans=()
          for f in [[.PlansGlob]]; do
            case "$f" in *_test.hcl) ;; *) plans+=("$f") ;; esac
          done
          if [ "${#plans[@]}" -eq 0 ]; then
            exit 0
          fi
          set -o pipefail
          planlock plan test "${plans[@]}" | tee "$RUNNER_TEMP/plan-test.txt"
      - name: Summarise changed plans
        if: always()
        env:
          BASE_SHA: ${{ github.event.pull_request.base.sha }}
        run: |
          body="$RUNNER_TEMP/planlock-summary.md"
          echo "<!-- planlock-summary -->" > "$body"
          changed=0
          while IFS= read -r f; do
            changed=1
            printf '\n### %s\n\n' "$f" >> "$body"
            case "$f" in *_test.hcl)
              echo "Tests of ${f%_test.hcl}.hcl: see Plan tests below." >> "$body"
              continue ;;
            esac
            if ! planlock plan show "$f" >> "$body" 2>> "$RUNNER_TEMP/show.err"; then
              echo "This file is not a valid plan: see the check's log." >> "$body"
            fi
          done < <(git diff --name-only --diff-filter=AMR "$BASE_SHA" HEAD -- ':(glob)[[.PlansGlob]]')
          if [ "$changed" -eq 0 ]; then
            echo "No plan changed in this pull request." >> "$body"
          fi
          if [ -s "$RUNNER_TEMP/plan-test.txt" ]; then
            { printf '\n### Plan tests\n\n~~~\n'; cat "$RUNNER_TEMP/plan-test.txt"; printf '~~~\n'; } >> "$body"
          fi
          echo "SUMMARY_FILE=$body" >> "$GITHUB_ENV"
      - name: Post or update the summary comment
        if: always() && env.SUMMARY_FILE != '' && github.event.pull_request.head.repo.full_name == github.repository
        env:
          GH_TOKEN: ${{ github.token }}
          PR: ${{ github.event.pull_request.number }}
        run: |
          id=$(gh api "repos/$GITHUB_REPOSITORY/issues/$PR/comments" --paginate \
            --jq '.[] | select(.body | startswith("<!-- planlock-summary -->")) | .id' | head -n 1)
          if [ -n "$id" ]; then
            gh api --method PATCH "repos/$GITHUB_REPOSITORY/issues/comments/$id" -F "body=@$SUMMARY_FILE" > /dev/null
          else
            gh api --method POST "repos/$GITHUB_REPOSITORY/issues/$PR/comments" -F "body=@$SUMMARY_FILE" > /dev/null
          fi

  sign:
    name: Sign approved plans and holds
    if: github.event_name == 'push'
    runs-on: ubuntu-latest
    timeout-minutes: 15
    # One publisher at a time, so pushes to [[.Approvals]] never race.
    concurrency:
      group: planlock-approvals
      cancel-in-progress: false
    permissions:
      contents: write # push the [[.Approvals]] branch
      id-token: write # keyless signing: the job's OIDC token gets a Fulcio certificate
      pull-requests: read # find the merged pull request for the approval record
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0
      - uses: actions/setup-go@v5
        with:
          go-version: "[[.GoVersion]]"
          cache: false
      - name: Install planlock
        run: [[if .FromSource]]go build -o "$RUNNER_TEMP/bin/planlock" ./cmd/planlock && echo "$RUNNER_TEMP/bin" >> "$GITHUB_PATH"[[else]]go install github.com/planlock/planlock/cmd/planlock@[[.PlanlockVersion]][[end]]
      - name: Sign changed plans and merged holds
        env:
          BEFORE: ${{ github.event.before }}
          GH_TOKEN: ${{ github.token }}
        run: |
          shopt -s globstar nullglob
          list="$RUNNER_TEMP/planlock-signed.txt"
          : > "$list"
          if git cat-file -e "$BEFORE^{commit}" 2> /dev/null; then
            git diff --name-only --diff-filter=AMR "$BEFORE" HEAD -- ':(glob)[[.PlansGlob]]' > "$RUNNER_TEMP/plans.txt"
            git diff --name-only --diff-filter=AMR "$BEFORE" HEAD -- ':(glob)[[.HoldsGlob]]' > "$RUNNER_TEMP/holds.txt"
          else
            # First push, or history rewritten: sign everything there is.
            printf '%s\n' [[.PlansGlob]] > "$RUNNER_TEMP/plans.txt"
            printf '%s\n' [[.HoldsGlob]] > "$RUNNER_TEMP/holds.txt"
          fi
          pr=$(gh api "repos/$GITHUB_REPOSITORY/commits/$GITHUB_SHA/pulls" --jq '.[0].number // empty' 2> /dev/null || true)
          for kind in plan hold; do
            while IFS= read -r f; do
              if [ -z "$f" ] || [ ! -f "$f" ]; then
                continue
              fi
              planlock sign --kind "$kind" ${pr:+--pr "$pr"} "$f"
              echo "$f" >> "$list"
            done < "$RUNNER_TEMP/${kind}s.txt"
          done
          echo "SIGNED_LIST=$list" >> "$GITHUB_ENV"
      - name: Publish bundles on [[.Approvals]]
        env:
          APPROVALS: "[[.Approvals]]"
        run: |
          if [ ! -s "$SIGNED_LIST" ]; then
            echo "nothing was signed"
            exit 0
          fi
          git config user.name "github-actions[bot]"
          git config user.email "41898282+github-actions[bot]@users.noreply.github.com"
          dir="$RUNNER_TEMP/approvals"
          if git ls-remote --exit-code --heads origin "$APPROVALS" > /dev/null; then
            git fetch --no-tags origin "$APPROVALS"
            git worktree add --detach "$dir" FETCH_HEAD
          else
            git worktree add --detach "$dir"
            git -C "$dir" checkout --orphan approvals-new
            git -C "$dir" rm -rfq --ignore-unmatch .
          fi
          while IFS= read -r f; do
            mkdir -p "$dir/$(dirname "$f")"
            cp "$f.sigstore.json" "$dir/$f.sigstore.json"
            git -C "$dir" add "$f.sigstore.json"
          done < "$SIGNED_LIST"
          if git -C "$dir" diff --cached --quiet; then
            echo "bundles already published"
            exit 0
          fi
          git -C "$dir" commit -q -m "planlock: approvals for $GITHUB_SHA"
          git -C "$dir" push origin "HEAD:refs/heads/$APPROVALS"
`))
