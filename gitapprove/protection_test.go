package gitapprove

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/planlock/planlock/internal/testkit/githubtest"
)

func TestBranchRulesAndWarnings(t *testing.T) {
	full := []map[string]any{
		githubtest.PullRequestRule(1, true, true, true),
		githubtest.SimpleRule("deletion"),
		githubtest.SimpleRule("non_fast_forward"),
		{"type": "required_status_checks", "ruleset_source_type": "Repository", "ruleset_source": "acme/plans", "ruleset_id": 42,
			"parameters": map[string]any{"strict_required_status_checks_policy": false, "required_status_checks": []any{map[string]any{"context": CheckName, "integration_id": 15368}}}},
	}
	for _, tc := range []struct {
		name  string
		rules []map[string]any
		want  []string // substrings of the warnings, in order
	}{
		{"everything required", full, nil},
		{"no rules at all", nil, []string{"does not require a pull request", "code-owner review", `"planlock check" check`}},
		{"review but no code owners, stale kept", []map[string]any{githubtest.PullRequestRule(1, false, false, true)},
			[]string{"code-owner review", "keeps approvals after new pushes", `"planlock check" check`}},
		{"pull request without approvals", []map[string]any{githubtest.PullRequestRule(0, true, true, false)},
			[]string{"requires no approving review", "most recent push", `"planlock check" check`}},
		// Two rulesets: the strictest of each setting applies, as on GitHub.
		{"strictest of two rulesets", append([]map[string]any{githubtest.PullRequestRule(0, false, false, false)}, full...), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gh := githubtest.New(t, "acme", "plans", "tok")
			gh.SetBranchRules("main", tc.rules...)
			rules, err := fakeClient(gh).BranchRules(ctx(t), "main")
			if err != nil {
				t.Fatal(err)
			}
			got := rules.Warnings(CheckName)
			if len(got) != len(tc.want) {
				t.Fatalf("warnings %q, want %d matching %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
	gh := githubtest.New(t, "acme", "plans", "tok")
	gh.SetToken("other")
	if _, err := fakeClient(gh).BranchRules(ctx(t), "main"); err == nil || !strings.Contains(err.Error(), "Bad credentials") {
		t.Errorf("bad token: %v", err)
	}
	// A branch name with a slash stays one path segment sequence, as GitHub expects.
	gh2 := githubtest.New(t, "acme", "plans", "tok")
	gh2.SetBranchRules("release/v1", githubtest.PullRequestRule(2, true, true, true))
	if r, err := fakeClient(gh2).BranchRules(ctx(t), "release/v1"); err != nil || r.RequiredApprovals != 2 {
		t.Errorf("release/v1: %+v, %v", r, err)
	}
}

func TestMergedPRAndApprovers(t *testing.T) {
	gh := githubtest.New(t, "acme", "plans", "tok")
	merge := strings.Repeat("1", 40)
	gh.AddPull(githubtest.Pull{Number: 1, Head: "feature", Base: "main", State: "open", HeadSHA: strings.Repeat("a", 40)})
	gh.AddPull(githubtest.Pull{Number: 2, Head: "other", Base: "main", State: "open", HeadSHA: merge})
	gh.Merge(1, merge)
	review := func(login, state string) map[string]any {
		return map[string]any{"id": 1, "user": map[string]any{"login": login}, "state": state, "commit_id": strings.Repeat("a", 40), "submitted_at": "2026-11-30T11:00:00Z"}
	}
	for _, r := range []map[string]any{
		review("alice", "APPROVED"), review("bob", "APPROVED"), review("bob", "CHANGES_REQUESTED"),
		review("carol", "CHANGES_REQUESTED"), review("carol", "APPROVED"), review("carol", "COMMENTED"),
		review("dave", "APPROVED"), review("dave", "DISMISSED"), {"id": 9, "user": nil, "state": "APPROVED"},
	} {
		gh.AddReview(1, r)
	}
	c := fakeClient(gh)
	pr, ok, err := c.MergedPR(ctx(t), merge)
	if err != nil || !ok || pr.Number != 1 || pr.MergeCommit != merge {
		t.Fatalf("MergedPR = %+v, %v, %v", pr, ok, err)
	}
	got, err := c.Approvers(ctx(t), 1)
	if err != nil || !reflect.DeepEqual(got, []string{"alice", "carol"}) {
		t.Errorf("Approvers = %v, %v; want [alice carol]", got, err)
	}
	if _, ok, err := c.MergedPR(ctx(t), strings.Repeat("9", 40)); ok || err != nil {
		t.Errorf("a commit without a pull request: ok=%v err=%v", ok, err)
	}
}

func TestRulesetAndCodeowners(t *testing.T) {
	b, err := Ruleset("main")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "ruleset.json", b)
	var rs struct {
		Enforcement string `json:"enforcement"`
		Bypass      []any  `json:"bypass_actors"`
		Rules       []struct {
			Type       string         `json:"type"`
			Parameters map[string]any `json:"parameters"`
		} `json:"rules"`
	}
	if err := json.Unmarshal(b, &rs); err != nil || rs.Enforcement != "active" || len(rs.Bypass) != 0 {
		t.Fatalf("ruleset: %+v, %v", rs, err)
	}
	types := map[string]map[string]any{}
	for _, r := range rs.Rules {
		types[r.Type] = r.Parameters
	}
	pr := types["pull_request"]
	if pr["require_code_owner_review"] != true || pr["dismiss_stale_reviews_on_push"] != true || pr["require_last_push_approval"] != true || pr["required_approving_review_count"] != 1.0 {
		t.Errorf("pull_request rule: %v", pr)
	}
	if _, ok := types["required_status_checks"]; !ok {
		t.Error("no required check")
	}
	if _, err := Ruleset("main; x"); err == nil {
		t.Error("accepted a bad branch")
	}

	s, err := CodeownersStanza("plans/**/*.hcl", "holds/**/*.hcl", []string{"@acme/approvers", "lead@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	want := CodeownersMarker + "\n/plans/** @acme/approvers lead@example.com\n/holds/** @acme/approvers lead@example.com\n/.github/workflows/** @acme/approvers lead@example.com\n/.github/CODEOWNERS @acme/approvers lead@example.com\n/.github/planlock-ruleset.json @acme/approvers lead@example.com\n"
	if s != want {
		t.Errorf("stanza:\n%s\nwant:\n%s", s, want)
	}
	for _, bad := range [][]string{nil, {"acme"}, {"@acme/x y"}, {"@acme\n* @evil"}} {
		if _, err := CodeownersStanza("plans/*.hcl", "holds/**/*.hcl", bad); err == nil {
			t.Errorf("owners %q accepted", bad)
		}
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		pat, name string
		want      bool
	}{
		{"plans/**/*.hcl", "plans/a.hcl", true},
		{"plans/**/*.hcl", "plans/x/y/a.hcl", true},
		{"plans/**/*.hcl", "plans/a.txt", false},
		{"plans/**/*.hcl", "other/a.hcl", false},
		{"plans/*.hcl", "plans/x/a.hcl", false},
		{"holds/**/*.hcl", "holds/refund/h1.hcl", true},
		{"**/*.hcl", "a.hcl", true},
	} {
		if got := globMatch(tc.pat, tc.name); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v", tc.pat, tc.name, got)
		}
	}
}

func TestUnpinnedUses(t *testing.T) {
	wf := "steps:\n  - uses: actions/checkout@v4\n  - uses: " + actionSetupGo.Uses() + "\n  - uses: ./local\n    uses: evil/x@main\n  - uses: \"a/b@" + strings.Repeat("f", 40) + "\"\n"
	if got := UnpinnedUses([]byte(wf)); !reflect.DeepEqual(got, []string{"actions/checkout@v4", "evil/x@main"}) {
		t.Errorf("UnpinnedUses = %q", got)
	}
}
