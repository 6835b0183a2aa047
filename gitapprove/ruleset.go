package gitapprove

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// RulesetPath is where planlock init github writes the branch ruleset, for
// the operator to import (Settings → Rules → Rulesets → Import a ruleset).
const RulesetPath = ".github/planlock-ruleset.json"

// CodeownersPath is the CODEOWNERS file GitHub reads first.
const CodeownersPath = ".github/CODEOWNERS"

// githubActionsAppID is the GitHub Actions app: a required check bound to
// it cannot be satisfied by a status another app or token posts.
const githubActionsAppID = 15368

// Ruleset is the branch ruleset planlock's threat model relies on, in
// GitHub's ruleset import/export JSON shape: a pull request with a
// code owner's approval, stale approvals dismissed, the most recent push
// approved by someone else, the planlock check passing, no force push or
// deletion, and nobody allowed to bypass it.
func Ruleset(branch string) ([]byte, error) {
	if !branchRE.MatchString(branch) || strings.Contains(branch, "..") {
		return nil, fmt.Errorf("invalid branch %q", branch)
	}
	rs := map[string]any{
		"name":        "planlock approvals",
		"target":      "branch",
		"enforcement": "active",
		"conditions": map[string]any{
			"ref_name": map[string]any{"include": []string{"refs/heads/" + branch}, "exclude": []string{}},
		},
		"bypass_actors": []any{},
		"rules": []any{
			map[string]any{"type": "deletion"},
			map[string]any{"type": "non_fast_forward"},
			map[string]any{"type": "pull_request", "parameters": map[string]any{
				"required_approving_review_count":   1,
				"dismiss_stale_reviews_on_push":     true,
				"require_code_owner_review":         true,
				"require_last_push_approval":        true,
				"required_review_thread_resolution": false,
				"allowed_merge_methods":             []string{"merge", "squash", "rebase"},
			}},
			map[string]any{"type": "required_status_checks", "parameters": map[string]any{
				"strict_required_status_checks_policy": false,
				"do_not_enforce_on_create":             false,
				"required_status_checks":               []any{map[string]any{"context": CheckName, "integration_id": githubActionsAppID}},
			}},
		},
	}
	b, err := json.MarshalIndent(rs, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode ruleset: %w", err)
	}
	return append(b, '\n'), nil
}

// CodeownersMarker starts planlock's CODEOWNERS stanza.
const CodeownersMarker = "# planlock: approving plans, holds and the signing workflow needs a code owner."

var ownerRE = regexp.MustCompile(`^@[A-Za-z0-9][A-Za-z0-9-]*(/[A-Za-z0-9._-]+)?$|^[^@\s]+@[^@\s]+$`)

// CodeownersStanza names owners for the plans and holds directories (the
// fixed part of each glob), the workflows and CODEOWNERS itself: with
// code-owner review required, nobody outside owners approves them.
func CodeownersStanza(plansGlob, holdsGlob string, owners []string) (string, error) {
	if len(owners) == 0 {
		return "", fmt.Errorf("no code owners: give the team or users who approve plans, e.g. @acme/plan-approvers")
	}
	for _, o := range owners {
		if !ownerRE.MatchString(o) {
			return "", fmt.Errorf("code owner %q: want @user, @org/team or an email address", o)
		}
	}
	who := strings.Join(owners, " ")
	var b strings.Builder
	b.WriteString(CodeownersMarker + "\n")
	seen := map[string]bool{}
	for _, g := range []string{plansGlob, holdsGlob} {
		dir := globDir(g)
		if seen[dir] {
			continue
		}
		seen[dir] = true
		fmt.Fprintf(&b, "/%s %s\n", dir, who)
	}
	fmt.Fprintf(&b, "/.github/workflows/** %s\n", who)
	fmt.Fprintf(&b, "/%s %s\n", CodeownersPath, who)
	fmt.Fprintf(&b, "/%s %s\n", RulesetPath, who)
	return b.String(), nil
}

// globDir is a glob's fixed leading directories followed by "**"
// ("plans/**/*.hcl" → "plans/**"), or "**/*.hcl" when it has none.
func globDir(glob string) string {
	segs := strings.Split(glob, "/")
	var fixed []string
	for _, s := range segs[:len(segs)-1] {
		if strings.ContainsAny(s, "*?[") {
			break
		}
		fixed = append(fixed, s)
	}
	if len(fixed) == 0 {
		return "**/*.hcl"
	}
	return strings.Join(fixed, "/") + "/**"
}

var (
	usesLine  = regexp.MustCompile(`^\s*(?:-\s+)?uses:\s*(\S+)(.*)$`)
	pinnedRef = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}$`)
)

// UnpinnedUses lists the "uses:" values of a workflow that are not pinned
// by a full commit SHA (local "./" actions and docker:// digests aside).
func UnpinnedUses(wf []byte) []string {
	var out []string
	for _, line := range strings.Split(string(wf), "\n") {
		m := usesLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		v := strings.Trim(m[1], `"'`)
		if strings.HasPrefix(v, "./") || strings.HasPrefix(v, "docker://") && strings.Contains(v, "@sha256:") {
			continue
		}
		if !pinnedRef.MatchString(v) {
			out = append(out, v)
		}
	}
	return out
}
