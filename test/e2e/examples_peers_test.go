//go:build e2e

package e2e

// The example plans examples/filesystem/edit-docs.hcl and
// examples/github-triage/labels.hcl driven end to end by the official
// TypeScript SDK client (test/peers/agent.mjs) through `planlock proxy`.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/planlock/planlock/internal/testkit/peers"
)

// examplePlan reads an example plan, applies the replacements (old, new
// pairs) and points its upstream block at argv; every replacement must hit.
func examplePlan(t *testing.T, path string, argv []string, replace ...string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	for i := 0; i+1 < len(replace); i += 2 {
		if !strings.Contains(src, replace[i]) {
			t.Fatalf("%s has no %q to replace", path, replace[i])
		}
		src = strings.ReplaceAll(src, replace[i], replace[i+1])
	}
	cmd, _ := json.Marshal(argv)
	out := regexp.MustCompile(`command = \[[^\]]*\]`).ReplaceAllString(src, "command = "+string(cmd))
	if out == src {
		t.Fatalf("%s has no upstream command to replace", path)
	}
	return writePlan(t, out)
}

// wantAudit checks the audit file's decision counts ("allow tool" →
// count) for the tools named in want.
func wantAudit(t *testing.T, path string, want map[string]int) {
	t.Helper()
	verifyAuditFile(t, path)
	got := auditCounts(t, path)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("audit: %d %q records, want %d (all: %v)", got[k], k, v, got)
		}
	}
}

func TestSDKAgentEditDocsExampleWithServerFilesystem(t *testing.T) {
	peers := peersDir(t)
	dir := t.TempDir()
	// The example confines the agent to /srv/docs; the test's docs tree
	// takes its place everywhere in the plan.
	docs, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	docs = filepath.Join(docs, "docs")
	if err := os.MkdirAll(filepath.Join(docs, "guide"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"intro.md":       "Planlock is a proxxy.\n",
		"guide/setup.md": "Instal planlock.\n",
		"notes.txt":      "not markdown\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(docs, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(dir, "secret.md")
	if err := os.WriteFile(secret, []byte("outside the tree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := examplePlan(t, "../../examples/filesystem/edit-docs.hcl",
		[]string{"node", filepath.Join(peers, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"), docs},
		"/srv/docs", docs)

	intro, setup := filepath.Join(docs, "intro.md"), filepath.Join(docs, "guide/setup.md")
	long := strings.Repeat("x", 1001)
	steps := []any{
		// 0-3: reads.
		map[string]any{"op": "callTool", "name": "read_multiple_files", "arguments": map[string]any{"paths": []string{intro, setup}}},
		map[string]any{"op": "callTool", "name": "read_multiple_files", "arguments": map[string]any{"paths": []string{intro, docs + "/guide/../../secret.md"}}},
		map[string]any{"op": "callTool", "name": "read_multiple_files", "arguments": map[string]any{"paths": []string{intro, secret}}},
		map[string]any{"op": "callTool", "name": "read_multiple_files", "arguments": map[string]any{"paths": []string{docs + "/guide..md"}}},
		// 4-5: a dry run, then the edit itself.
		map[string]any{"op": "callTool", "name": "edit_file", "arguments": map[string]any{"path": intro, "dryRun": true,
			"edits": []any{map[string]any{"oldText": "proxxy", "newText": "proxy"}}}},
		map[string]any{"op": "callTool", "name": "edit_file", "arguments": map[string]any{"path": setup,
			"edits": []any{map[string]any{"oldText": "Instal", "newText": "Install"}}}},
		// 6-11: blocked edits.
		map[string]any{"op": "callTool", "name": "edit_file", "arguments": map[string]any{"path": intro,
			"edits": []any{map[string]any{"oldText": long, "newText": "proxy"}}}},
		map[string]any{"op": "callTool", "name": "edit_file", "arguments": map[string]any{"path": intro,
			"edits": []any{
				map[string]any{"oldText": "a", "newText": "b"}, map[string]any{"oldText": "c", "newText": "d"},
				map[string]any{"oldText": "e", "newText": "f"}, map[string]any{"oldText": "g", "newText": "h"},
				map[string]any{"oldText": "i", "newText": "j"}, map[string]any{"oldText": "proxxy", "newText": "proxy"},
			}}},
		map[string]any{"op": "callTool", "name": "edit_file", "arguments": map[string]any{"path": intro,
			"edits": []any{map[string]any{"oldText": "proxxy", "newText": "proxy", "replaceAll": true}}}},
		map[string]any{"op": "callTool", "name": "edit_file", "arguments": map[string]any{"path": intro,
			"edits": []any{map[string]any{"oldText": "proxxy", "newText": "proxxy"}}}},
		map[string]any{"op": "callTool", "name": "edit_file", "arguments": map[string]any{"path": filepath.Join(docs, "notes.txt"),
			"edits": []any{map[string]any{"oldText": "not", "newText": "now"}}}},
		map[string]any{"op": "callTool", "name": "edit_file", "arguments": map[string]any{"path": secret,
			"edits": []any{map[string]any{"oldText": "outside", "newText": "inside"}}}},
		// 12: a tool the plan does not name.
		map[string]any{"op": "callTool", "name": "write_file", "arguments": map[string]any{"path": intro, "content": "gone"}},
		// 13: the reads see the one applied edit.
		map[string]any{"op": "callTool", "name": "read_multiple_files", "arguments": map[string]any{"paths": []string{intro, setup}}},
	}
	script, err := json.Marshal(steps)
	if err != nil {
		t.Fatal(err)
	}
	lines := runAgent(t, nil, string(script), "--",
		planlockBin, "proxy", "--plan", plan, "--insecure-skip-verify", "--state", filepath.Join(dir, "state"))
	const blocked = `blocked by plan "edit-docs": `
	wantText(t, lines, "0", false, "Planlock is a proxxy.")
	wantText(t, lines, "0", false, "Instal planlock.")
	// Long values are cut in the message; the element's index names it.
	wantText(t, lines, "1", true, blocked+`step "read": argument "paths"[1] = "`+docs)
	wantText(t, lines, "1", true, `does not match the pattern`)
	wantText(t, lines, "2", true, blocked+`step "read": argument "paths"[1] = "`+secret+`"`)
	wantText(t, lines, "3", true, blocked+`step "read": argument "paths" fails its check: paths must stay inside `+docs)
	wantText(t, lines, "4", false, "+Planlock is a proxy.")
	wantText(t, lines, "5", false, "+Install planlock.")
	wantText(t, lines, "6", true, blocked+`step "edit": argument "edits"[0].oldText has 1001 characters, more than the maximum length 1000`)
	wantText(t, lines, "7", true, blocked+`step "edit": argument "edits" has 6 items, more than the maximum 5`)
	wantText(t, lines, "8", true, blocked+`step "edit": argument "edits"[0].replaceAll is not allowed by the plan`)
	wantText(t, lines, "9", true, blocked+`step "edit": check failed: every edit must change something`)
	wantText(t, lines, "10", true, blocked+`step "edit": argument "path" = "`+docs)
	wantText(t, lines, "10", true, `does not match the pattern`)
	wantText(t, lines, "11", true, blocked+`step "edit": argument "path" = "`+secret+`"`)
	wantText(t, lines, "12", true, `tool "write_file" is not in plan "edit-docs"`)
	wantText(t, lines, "13", false, "Planlock is a proxxy.")
	wantText(t, lines, "13", false, "Install planlock.")

	// Only the allowed calls reached the server: the dry run and the
	// blocked edits left the files as they were, the one edit applied.
	want := map[string]string{
		"intro.md":       files["intro.md"],
		"guide/setup.md": "Install planlock.\n",
		"notes.txt":      files["notes.txt"],
		"../secret.md":   "outside the tree\n",
	}
	for name, body := range want {
		b, err := os.ReadFile(filepath.Join(docs, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != body {
			t.Errorf("%s = %q, want %q", name, b, body)
		}
	}
	wantAudit(t, filepath.Join(dir, "state", "audit.jsonl"), map[string]int{
		"allow read_multiple_files": 2, "block read_multiple_files": 3,
		"allow edit_file": 2, "block edit_file": 6, "block write_file": 1,
	})
}

func TestSDKAgentTriageLabelsExampleWithGitHubStandIn(t *testing.T) {
	peersDir(t)
	dir := t.TempDir()
	callsLog := filepath.Join(dir, "calls.jsonl")
	plan := examplePlan(t, "../../examples/github-triage/labels.hcl", []string{githubBin, "--calls-log", callsLog})
	// The plan's upstream env passes the token; the stand-in does not start
	// without it.
	env := []string{"GITHUB_PERSONAL_ACCESS_TOKEN=ghp_test_token"}
	direct := runAgent(t, env, `[{"op":"listTools"}]`, "--", githubBin)

	update := func(n int, labels any, extra ...any) map[string]any {
		args := map[string]any{"owner": "acme", "repo": "app", "issue_number": n}
		if labels != nil {
			args["labels"] = labels
		}
		for i := 0; i+1 < len(extra); i += 2 {
			args[extra[i].(string)] = extra[i+1]
		}
		return map[string]any{"op": "callTool", "name": "update_issue", "arguments": args}
	}
	steps := []any{
		map[string]any{"op": "listTools"},
		map[string]any{"op": "callTool", "name": "get_issue", "arguments": map[string]any{"owner": "acme", "repo": "app", "issue_number": 7}},
		map[string]any{"op": "callTool", "name": "get_issue", "arguments": map[string]any{"owner": "evil", "repo": "app", "issue_number": 7}},
		update(7, []string{"bug"}),
		update(8, []string{"docs", "question", "needs-repro"}),
		update(7, []string{"wontfix"}),
		update(7, []string{"bug", "bug"}),
		update(7, []string{"bug", "docs", "question", "needs-repro"}),
		update(7, []string{}),
		update(7, []string{"bug"}, "state", "closed"),
		update(7, nil),
		update(0, []string{"bug"}),
		map[string]any{"op": "callTool", "name": "add_issue_comment", "arguments": map[string]any{"owner": "acme", "repo": "app", "issue_number": 7, "body": "x"}},
		map[string]any{"op": "callTool", "name": "get_issue", "arguments": map[string]any{"owner": "acme", "repo": "app", "issue_number": 8}},
	}
	script, err := json.Marshal(steps)
	if err != nil {
		t.Fatal(err)
	}
	lines := runAgent(t, env, string(script), "--",
		planlockBin, "proxy", "--plan", plan, "--insecure-skip-verify", "--state", filepath.Join(dir, "state"))

	// The agent sees the plan's two tools of the stand-in's three, their
	// schemas unchanged.
	type tool struct {
		Name        string
		InputSchema json.RawMessage
	}
	var viaProxy, upstream struct{ Tools []tool }
	_ = json.Unmarshal(lines["0"].Result, &viaProxy)
	_ = json.Unmarshal(direct["0"].Result, &upstream)
	schemas := map[string]string{}
	for _, tl := range upstream.Tools {
		schemas[tl.Name] = string(tl.InputSchema)
	}
	var names []string
	for _, tl := range viaProxy.Tools {
		names = append(names, tl.Name)
		if string(tl.InputSchema) != schemas[tl.Name] {
			t.Errorf("tool %s: schema %s, upstream %s", tl.Name, tl.InputSchema, schemas[tl.Name])
		}
	}
	if len(upstream.Tools) != 3 || strings.Join(names, ",") != "get_issue,update_issue" {
		t.Fatalf("tools via the proxy %v (upstream %d): want get_issue,update_issue", names, len(upstream.Tools))
	}
	const blocked = `blocked by plan "triage-labels-acme-app": `
	tests := []struct {
		step    string
		isError bool
		want    string
	}{
		{"1", false, `"number": 7`},
		{"2", true, blocked + `step "read": argument "owner" = "evil"`},
		{"3", false, `"name": "bug"`},
		{"4", false, `"name": "needs-repro"`},
		{"5", true, blocked + `step "label": argument "labels"[0] = "wontfix"`},
		{"6", true, blocked + `step "label": check failed: each label at most once`},
		{"7", true, blocked + `step "label": argument "labels" has 4 items, more than the maximum 3`},
		{"8", true, blocked + `step "label": argument "labels" has 0 items`},
		{"9", true, blocked + `step "label": argument "state" is not allowed by the plan`},
		{"10", true, blocked + `step "label": argument "labels" is required`},
		{"11", true, blocked + `step "label": argument "issue_number" = 0 is below the minimum 1`},
		{"12", true, `tool "add_issue_comment" is not in plan "triage-labels-acme-app"`},
		{"13", false, `"name": "question"`},
	}
	for _, tc := range tests {
		wantText(t, lines, tc.step, tc.isError, tc.want)
	}

	// The stand-in received exactly the allowed calls, arguments unchanged.
	var got []string
	for _, c := range peers.ReadCalls(t, callsLog) {
		got = append(got, c.Tool+" "+string(c.Arguments))
	}
	want := []string{
		`get_issue {"issue_number":7,"owner":"acme","repo":"app"}`,
		`update_issue {"issue_number":7,"labels":["bug"],"owner":"acme","repo":"app"}`,
		`update_issue {"issue_number":8,"labels":["docs","question","needs-repro"],"owner":"acme","repo":"app"}`,
		`get_issue {"issue_number":8,"owner":"acme","repo":"app"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("upstream calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantAudit(t, filepath.Join(dir, "state", "audit.jsonl"), map[string]int{
		"allow get_issue": 2, "block get_issue": 1, "allow update_issue": 2, "block update_issue": 7, "block add_issue_comment": 1,
	})
}
