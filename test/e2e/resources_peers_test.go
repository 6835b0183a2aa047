//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// everythingExample is examples/everything/everything.hcl with its upstream
// block naming the locally installed server-everything.
func everythingExample(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile("../../examples/everything/everything.hcl")
	if err != nil {
		t.Fatal(err)
	}
	cmd, _ := json.Marshal(everythingCmd(t))
	out := regexp.MustCompile(`command = \[[^\]]*\]`).ReplaceAllString(string(src), "command = "+string(cmd))
	if out == string(src) {
		t.Fatal("the example has no upstream command to replace")
	}
	return writePlan(t, out)
}

const everythingResourcesScript = `[
 {"op":"request","method":"resources/list"},
 {"op":"request","method":"resources/templates/list"},
 {"op":"request","method":"prompts/list"},
 {"op":"request","method":"resources/read","params":{"uri":"demo://resource/static/document/architecture.md"}},
 {"op":"request","method":"resources/read","params":{"uri":"demo://resource/dynamic/blob/1"}},
 {"op":"request","method":"resources/read","params":{"uri":"demo://resource/dynamic/text/1"}},
 {"op":"request","method":"resources/read","params":{"uri":"demo://resource/dynamic/text/2"}},
 {"op":"request","method":"resources/read","params":{"uri":"demo://resource/dynamic/text/3"}},
 {"op":"request","method":"resources/read","params":{"uri":"demo://resource/dynamic/text/4"}},
 {"op":"request","method":"prompts/get","params":{"name":"args-prompt","arguments":{"city":"Paris"}}},
 {"op":"request","method":"prompts/get","params":{"name":"args-prompt","arguments":{"city":"London"}}},
 {"op":"request","method":"prompts/get","params":{"name":"completable-prompt","arguments":{"department":"Engineering","name":"x"}}},
 {"op":"request","method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"completable-prompt"},"argument":{"name":"department","value":"E"}}},
 {"op":"request","method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"demo://resource/dynamic/text/{resourceId}"},"argument":{"name":"resourceId","value":"1"}}},
 {"op":"request","method":"resources/subscribe","params":{"uri":"demo://resource/static/document/architecture.md"}},
 {"op":"request","method":"resources/subscribe","params":{"uri":"demo://resource/dynamic/blob/1"}},
 {"op":"listTools"}
]`

// checkEverythingResources checks the agent's view of the everything
// example: filtered lists, allowed and blocked reads, gets, completions and
// subscriptions.
func checkEverythingResources(t *testing.T, lines map[string]agentLine) {
	t.Helper()
	var caps struct {
		Resources *struct{ Subscribe, ListChanged bool }
		Prompts   *struct{ ListChanged bool }
	}
	if err := json.Unmarshal(lines["connect"].Capabilities, &caps); err != nil || caps.Resources == nil || caps.Prompts == nil ||
		!caps.Resources.Subscribe || !caps.Resources.ListChanged {
		t.Fatalf("capabilities %s: want resources (subscribe, listChanged) and prompts", lines["connect"].Capabilities)
	}
	ok := func(step string) json.RawMessage {
		t.Helper()
		l := lines[step]
		if !l.OK {
			t.Fatalf("step %s: %+v, want a result", step, l.Error)
		}
		return l.Result
	}
	blocked := func(step, substr string) {
		t.Helper()
		l := lines[step]
		if l.OK || l.Error == nil || !strings.Contains(l.Error.Message, "blocked by plan \"everything-docs\": "+substr) {
			t.Fatalf("step %s: ok=%v result %s error %+v, want blocked: %q", step, l.OK, l.Result, l.Error, substr)
		}
	}
	var rl struct{ Resources []struct{ URI string } }
	_ = json.Unmarshal(ok("0"), &rl)
	var uris []string
	for _, r := range rl.Resources {
		uris = append(uris, r.URI)
	}
	if len(uris) != 7 || !slices.Contains(uris, "demo://resource/static/document/architecture.md") {
		t.Fatalf("resources/list: %v, want the 7 static documents", uris)
	}
	var tl struct {
		ResourceTemplates []struct{ URITemplate string }
	}
	_ = json.Unmarshal(ok("1"), &tl)
	if len(tl.ResourceTemplates) != 1 || tl.ResourceTemplates[0].URITemplate != "demo://resource/dynamic/text/{resourceId}" {
		t.Fatalf("resources/templates/list: %+v, want only the text template", tl)
	}
	var pl struct{ Prompts []struct{ Name string } }
	_ = json.Unmarshal(ok("2"), &pl)
	var names []string
	for _, p := range pl.Prompts {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "args-prompt,simple-prompt" {
		t.Fatalf("prompts/list: %v", names)
	}
	if r := ok("3"); !strings.Contains(string(r), "architecture.md") {
		t.Fatalf("read architecture.md: %s", r)
	}
	blocked("4", `resource "demo://resource/dynamic/blob/1" is not in plan`)
	for _, s := range []string{"5", "6", "7"} {
		if r := ok(s); !strings.Contains(string(r), "plaintext resource") {
			t.Fatalf("step %s: %s", s, r)
		}
	}
	blocked("8", `resource:dynamic: max_reads 3 used up (3 forwarded)`)
	if r := ok("9"); !strings.Contains(string(r), "Paris") {
		t.Fatalf("prompts/get args-prompt Paris: %s", r)
	}
	blocked("10", `prompt "args-prompt": argument "city" = "London", want one of ["Paris", "Berlin"]`)
	blocked("11", `prompt "completable-prompt" is not in plan`)
	blocked("12", `completion for prompt "completable-prompt"`)
	ok("13")
	ok("14")
	blocked("15", `resource "demo://resource/dynamic/blob/1" is not in plan "everything-docs", so it cannot be subscribed to`)
	var tools struct{ Tools []json.RawMessage }
	_ = json.Unmarshal(ok("16"), &tools)
	if len(tools.Tools) != 0 {
		t.Fatalf("tools/list: %d tools, want none", len(tools.Tools))
	}
}

// auditCounts counts the audit records by decision and method.
func auditCounts(t *testing.T, path string) map[string]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r struct{ Type, Decision, Tool string }
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Type == "decision" {
			n[r.Decision+" "+r.Tool]++
		}
	}
	return n
}

func TestSDKAgentEverythingResourcesAndPromptsStdio(t *testing.T) {
	dir := t.TempDir()
	plan := everythingExample(t)
	lines := runAgent(t, nil, everythingResourcesScript, "--",
		planlockBin, "proxy", "--plan", plan, "--insecure-skip-verify", "--state", filepath.Join(dir, "state"))
	checkEverythingResources(t, lines)
	audit := filepath.Join(dir, "state", "audit.jsonl")
	verifyAuditFile(t, audit)
	got := auditCounts(t, audit)
	want := map[string]int{
		"allow resources/read": 4, "block resources/read": 2,
		"allow prompts/get": 1, "block prompts/get": 2,
		"block completion/complete": 1, "block resources/subscribe": 1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("audit: %d %q records, want %d (all: %v)", got[k], k, v, got)
		}
	}
}

func TestSDKAgentEverythingResourcesAndPromptsHTTP(t *testing.T) {
	peersDir(t)
	dir := t.TempDir()
	plan := everythingExample(t)
	const token = "s3cret-token"
	proxyURL := startLogged(t, []string{"PLANLOCK_LISTEN_TOKEN=" + token}, `on (http://\S+/mcp)`,
		planlockBin, "proxy", "--plan", plan, "--insecure-skip-verify", "--state", filepath.Join(dir, "state"),
		"--listen", "127.0.0.1:0")
	lines := runAgent(t, nil, everythingResourcesScript, "--url", proxyURL, "--token", token)
	checkEverythingResources(t, lines)
}

// plan init offers server-everything's resources, templates and prompts as
// commented blocks.
func TestPlanInitOffersResourcesAndPrompts(t *testing.T) {
	out, err := exec.Command(planlockBin, append([]string{"plan", "init", "demo", "--"}, everythingCmd(t)...)...).Output()
	if err != nil {
		t.Fatalf("plan init: %v\n%s", err, out)
	}
	for _, want := range []string{
		`#   uri       = "demo://resource/static/document/architecture.md"`,
		`#   uri_template = "demo://resource/dynamic/text/{resourceId}"`,
		`# prompt "args-prompt" {`,
		`#   arg "city" { max_length = 100 }`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("plan init output lacks %q", want)
		}
	}
}
