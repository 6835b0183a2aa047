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
	// PlanlockVersion is the exact module version go install fetches
	// (vX.Y.Z: the checksum database pins its content). FromSource builds
	// ./cmd/planlock from the checkout instead, at the same commit (for the
	// planlock repository itself). One of the two is required.
	PlanlockVersion string
	FromSource      bool
	// SourceCommit, with FromSource, is the commit (40 hex digits) of
	// github.com/planlock/planlock the workflow checks out and builds, for a
	// repository that is not planlock's own (a plans repository).
	SourceCommit string
	// GoVersion for actions/setup-go: an exact release, X.Y.Z.
	GoVersion string
	// Schedule is the cron line of the safety-net reconcile run; "17 * * * *" when empty.
	Schedule string
}

// installTmpl is the steps that put planlock on the PATH: go install of the
// pinned version, or a build from source: of the checked-out repository
// (planlock's own), or, with SourceCommit, of planlock's source checked out
// at that commit beside the repository and removed once built, so that
// nothing of it is in the work tree the later steps read.
const installTmpl = `[[define "install"]][[if .SourceCommit]]      - name: Check out planlock's source
        uses: [[.Checkout]]
        with:
          repository: planlock/planlock
          ref: [[.SourceCommit]]
          path: .planlock-src
          persist-credentials: false
      - name: Install planlock
        run: go build -C .planlock-src -trimpath -o "$RUNNER_TEMP/bin/planlock" ./cmd/planlock && rm -rf .planlock-src && echo "$RUNNER_TEMP/bin" >> "$GITHUB_PATH"
[[else]]      - name: Install planlock
        run: [[if .FromSource]]go build -trimpath -o "$RUNNER_TEMP/bin/planlock" ./cmd/planlock && echo "$RUNNER_TEMP/bin" >> "$GITHUB_PATH"[[else]]GOBIN="$RUNNER_TEMP/bin" go install github.com/planlock/planlock/cmd/planlock@[[.PlanlockVersion]] && echo "$RUNNER_TEMP/bin" >> "$GITHUB_PATH"[[end]]
[[end]][[end]]`

// WorkflowPath is where the workflow goes in a repository.
const WorkflowPath = ".github/workflows/planlock.yml"

// CheckName is the name of the pull request check a ruleset must require.
const CheckName = "planlock check"

// pinnedAction is a GitHub action pinned by full commit SHA; Tag is the
// release the SHA was published as, written beside it for people.
type pinnedAction struct{ Repo, SHA, Tag string }

// Uses is the value of a step's "uses:" key, with the tag as a comment.
func (a pinnedAction) Uses() string { return a.Repo + "@" + a.SHA + " # " + a.Tag }

// The actions the workflows use, pinned: a tag can be moved to other code,
// a commit SHA cannot.
var (
	actionCheckout         = pinnedAction{"actions/checkout", "11bd71901bbe5b1630ceea73d27597364c9af683", "v4.2.2"}
	actionSetupGo          = pinnedAction{"actions/setup-go", "d35c59abb061a4a6fb18e82ac0862c26744d6ab5", "v5.5.0"}
	actionUploadArtifact   = pinnedAction{"actions/upload-artifact", "ea165f8d65b6e75b540449e92b4886f43607fa02", "v4.6.2"}
	actionDownloadArtifact = pinnedAction{"actions/download-artifact", "d3f86a106a0bac45b974a628896c90dbdf5c8093", "v4.3.0"}
)

var (
	globRE    = regexp.MustCompile(`^[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.*\-]+)*$`)
	branchRE  = regexp.MustCompile(`^[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*$`)
	versionRE = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+([.\-+][A-Za-z0-9.\-]+)?$`)
	commitRE  = regexp.MustCompile(`^[0-9a-f]{40}$`)
	goVerRE   = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`)
	cronRE    = regexp.MustCompile(`^[0-9*/,\-]+( [0-9*/,\-]+){4}$`)
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
	if o.Schedule == "" {
		o.Schedule = "17 * * * *"
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
	switch {
	case o.FromSource && o.PlanlockVersion != "":
		return fmt.Errorf("give a planlock version or build from source, not both")
	case !o.FromSource && o.PlanlockVersion == "":
		return fmt.Errorf("no planlock version to install: give an exact version (vX.Y.Z) or build from source")
	case o.SourceCommit != "" && !o.FromSource:
		return fmt.Errorf("a planlock source commit is for building from source")
	case o.SourceCommit != "" && !commitRE.MatchString(o.SourceCommit):
		return fmt.Errorf("invalid planlock source commit %q: want a full commit SHA (40 hex digits)", o.SourceCommit)
	case !o.FromSource && !versionRE.MatchString(o.PlanlockVersion):
		return fmt.Errorf("invalid planlock version %q: want an exact vX.Y.Z (no latest: the signing job must run known code)", o.PlanlockVersion)
	}
	if !goVerRE.MatchString(o.GoVersion) {
		return fmt.Errorf("invalid Go version %q: want an exact release such as 1.26.8", o.GoVersion)
	}
	if !cronRE.MatchString(o.Schedule) {
		return fmt.Errorf("invalid schedule %q: want a cron line of five fields", o.Schedule)
	}
	return nil
}

// GitHubWorkflow renders the workflow: on pull requests it checks hold
// pull requests change only their hold, format-checks and validates the
// plans and comments the summary; on pushes to the protected branch and on
// a schedule it reconciles: signs every plan and hold file whose exact bytes
// have no valid bundle yet (job "sign": OIDC token, read-only repository
// token), then publishes the bundles on the approvals branch (job "publish":
// write token, no OIDC token, no third-party code but the pinned
// download-artifact action).
func GitHubWorkflow(o WorkflowOptions) ([]byte, error) {
	if err := o.normalize(); err != nil {
		return nil, err
	}
	data := struct {
		WorkflowOptions
		Checkout, SetupGo, Upload, Download, Check, WorkflowPath string
	}{o, actionCheckout.Uses(), actionSetupGo.Uses(), actionUploadArtifact.Uses(), actionDownloadArtifact.Uses(), CheckName, WorkflowPath}
	var b bytes.Buffer
	if err := workflowTmpl.ExecuteTemplate(&b, "wf", data); err != nil {
		return nil, fmt.Errorf("render workflow: %w", err)
	}
	return b.Bytes(), nil
}

var workflowTmpl = template.Must(template.New("wf").Delims("[[", "]]").Parse(installTmpl + `# Written by "planlock init github". Approvals travel as pull requests:
#  - every pull request runs the "[[.Check]]" check: a hold pull request may
#    change only its own hold (and one pin line); plans pass "plan fmt
#    --check" and "plan validate"; the "plan show" summary is commented;
#  - every push to [[.Branch]] and a scheduled run reconcile: every plan and
#    hold file at the head of [[.Branch]] whose exact bytes have no valid
#    bundle on [[.Approvals]] is signed keyless (GitHub OIDC -> Fulcio ->
#    Rekor), then published as <file>.sigstore.json on [[.Approvals]]. A
#    missed, cancelled or failed run is made good by the next one. That
#    branch is transport only: the proxy trusts a bundle because its
#    signature verifies against its trust policy.
name: planlock

on:
  pull_request:
  push:
    branches:
      - "[[.Branch]]"
  schedule:
    - cron: "[[.Schedule]]"

permissions: {}

jobs:
  check:
    name: [[.Check]]
    if: github.event_name == 'pull_request'
    runs-on: ubuntu-latest
    timeout-minutes: 15
    permissions:
      contents: read
      pull-requests: write
    steps:
      - uses: [[.Checkout]]
        with:
          fetch-depth: 0
          persist-credentials: false
      - uses: [[.SetupGo]]
        with:
          go-version: "[[.GoVersion]]"
          cache: false
[[template "install" .]]      - name: A hold pull request changes only its hold
        env:
          BASE_SHA: ${{ github.event.pull_request.base.sha }}
          HEAD_SHA: ${{ github.event.pull_request.head.sha }}
          HEAD_REF: ${{ github.event.pull_request.head.ref }}
        run: planlock check-pr --base "$BASE_SHA" --head "$HEAD_SHA" --head-ref "$HEAD_REF" --plans-glob "[[.PlansGlob]]" --holds-glob "[[.HoldsGlob]]"
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
            # The path is shown with only plain characters: a file name is
            # as hostile as a plan's strings.
            printf '\n### %s\n\n' "$(printf '%s' "$f" | tr -c 'A-Za-z0-9._/-' '_')" >> "$body"
            case "$f" in *_test.hcl)
              echo "Tests of this plan (not signed): see Plan tests below." >> "$body"
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
          # Only this workflow's own comment is updated: the marker alone
          # could be copied into anyone's comment.
          id=$(gh api "repos/$GITHUB_REPOSITORY/issues/$PR/comments" --paginate \
            --jq '.[] | select(.user.login == "github-actions[bot]" and (.body | startswith("<!-- planlock-summary -->"))) | .id' | head -n 1)
          if [ -n "$id" ]; then
            gh api --method PATCH "repos/$GITHUB_REPOSITORY/issues/comments/$id" -F "body=@$SUMMARY_FILE" > /dev/null
          else
            gh api --method POST "repos/$GITHUB_REPOSITORY/issues/$PR/comments" -F "body=@$SUMMARY_FILE" > /dev/null
          fi

  sign:
    name: Sign what has no valid approval yet
    if: github.event_name != 'pull_request' && github.ref == 'refs/heads/[[.Branch]]'
    runs-on: ubuntu-latest
    timeout-minutes: 15
    # No concurrency group: GitHub would cancel pending runs. Each run signs
    # whatever is missing, so overlapping runs at worst sign a file twice.
    permissions:
      contents: read
      id-token: write # keyless signing: the job's OIDC token gets a Fulcio certificate
      pull-requests: read # the merged pull request and its approving reviews
    steps:
      - uses: [[.Checkout]]
        with:
          fetch-depth: 0 # history for who approved each file, and the [[.Approvals]] branch
          persist-credentials: false
      - uses: [[.SetupGo]]
        with:
          go-version: "[[.GoVersion]]"
          cache: false
[[template "install" .]]      - name: Sign every plan and hold without a valid approval
        env:
          GH_TOKEN: ${{ github.token }} # read-only here: pull requests and reviews
        run: |
          planlock reconcile --out "$RUNNER_TEMP/bundles" \
            --plans-glob "[[.PlansGlob]]" --holds-glob "[[.HoldsGlob]]" --approvals-branch "[[.Approvals]]" \
            --certificate-identity "$GITHUB_SERVER_URL/$GITHUB_REPOSITORY/[[.WorkflowPath]]@refs/heads/[[.Branch]]" \
            --certificate-oidc-issuer https://token.actions.githubusercontent.com \
            --certificate-github-workflow-trigger push,schedule
      - uses: [[.Upload]]
        if: ${{ !cancelled() }}
        with:
          name: planlock-bundles
          path: ${{ runner.temp }}/bundles
          if-no-files-found: error
          retention-days: 1

  publish:
    name: Publish bundles on [[.Approvals]]
    needs: sign
    if: ${{ !cancelled() && github.event_name != 'pull_request' }}
    runs-on: ubuntu-latest
    timeout-minutes: 10
    permissions:
      contents: write # push the [[.Approvals]] branch; nothing else runs here
    steps:
      - uses: [[.Download]]
        with:
          name: planlock-bundles
          path: ${{ runner.temp }}/bundles
      - name: Push to [[.Approvals]]
        env:
          APPROVALS: "[[.Approvals]]"
          ORIGIN: ${{ github.server_url }}/${{ github.repository }}.git
          TOKEN: ${{ github.token }}
        run: |
          src="$RUNNER_TEMP/bundles"
          if [ ! -s "$src/planlock-reconcile.txt" ]; then
            echo "nothing was signed"
            exit 0
          fi
          # Only regular files and directories come from the sign job.
          if [ -n "$(find "$src" ! -type f ! -type d -print -quit)" ]; then
            echo "refusing: the bundles artifact holds a symlink or special file" >&2
            exit 1
          fi
          auth="AUTHORIZATION: basic $(printf 'x-access-token:%s' "$TOKEN" | base64 | tr -d '\n')"
          work="$RUNNER_TEMP/approvals"
          git init -q "$work"
          cd "$work"
          git config user.name "github-actions[bot]"
          git config user.email "41898282+github-actions[bot]@users.noreply.github.com"
          git remote add origin "$ORIGIN"
          for attempt in 1 2 3 4 5; do
            if git -c "http.extraheader=$auth" fetch -q --no-tags origin "+refs/heads/$APPROVALS:refs/remotes/origin/approvals" 2> /dev/null; then
              git checkout -q -f -B approvals refs/remotes/origin/approvals
            else
              git checkout -q -f --orphan "approvals-$attempt"
              git rm -rfq --cached --ignore-unmatch . > /dev/null
            fi
            git clean -qfdx
            if git ls-files -s | awk '$1 == "120000" { found = 1 } END { exit !found }'; then
              echo "refusing: $APPROVALS holds a symlink" >&2
              exit 1
            fi
            while IFS= read -r f; do
              case "$f" in
                "" | /* | *..* ) echo "refusing path $f" >&2; exit 1 ;;
              esac
              dest="$f.sigstore.json"
              p="$dest"
              while [ "$p" != . ] && [ "$p" != / ]; do
                if [ -L "$p" ]; then
                  echo "refusing: $p is a symlink" >&2
                  exit 1
                fi
                p=$(dirname "$p")
              done
              mkdir -p "$(dirname "$dest")"
              cp "$src/$dest" "$dest"
              git add -- "$dest"
            done < "$src/planlock-reconcile.txt"
            if git diff --cached --quiet; then
              echo "bundles already published"
              exit 0
            fi
            git commit -q -m "planlock: approvals for $GITHUB_SHA"
            if git -c "http.extraheader=$auth" push -q origin "HEAD:refs/heads/$APPROVALS"; then
              exit 0
            fi
            echo "push raced another run; trying again"
            sleep $((attempt * 3))
          done
          echo "could not publish after 5 attempts" >&2
          exit 1
`))
