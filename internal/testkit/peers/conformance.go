package peers

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"testing"
	"time"

	"github.com/planlock/planlock/internal/testkit/leakcheck"
)

// ConformanceCheck is one check of a conformance scenario.
type ConformanceCheck struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Status       string `json:"status"` // SUCCESS, FAILURE, WARNING, INFO
	ErrorMessage string `json:"errorMessage"`
}

// ConformanceScenario is the outcome of one server scenario.
type ConformanceScenario struct {
	Name   string
	Checks []ConformanceCheck
}

// Passed counts SUCCESS checks, Failed counts FAILURE checks.
func (s ConformanceScenario) Passed() int { return s.count("SUCCESS") }

// Failed counts FAILURE checks.
func (s ConformanceScenario) Failed() int { return s.count("FAILURE") }

// OK is the suite's own verdict: at least one check passed and none failed.
func (s ConformanceScenario) OK() bool { return s.Passed() > 0 && s.Failed() == 0 }

func (s ConformanceScenario) count(status string) int {
	n := 0
	for _, c := range s.Checks {
		if c.Status == status {
			n++
		}
	}
	return n
}

// ConformanceBaseline is test/peers/conformance-baseline.json: per upstream,
// the conformance server scenarios that pass against it directly. A proxy in
// front of the same upstream must pass the same ones.
type ConformanceBaseline struct {
	Everything   ConformanceSet `json:"everything"`   // server-everything (StartEverythingHTTP)
	TestUpstream ConformanceSet `json:"testupstream"` // testupstream --conformance (StartHTTP)
}

// ConformanceSet is the baseline of one upstream.
type ConformanceSet struct {
	Passing []string `json:"passing"` // every scenario that passes, sorted
	Tools   []string `json:"tools"`   // the passing scenarios about tools
	// Vacuous scenarios pass without exercising what they name (the upstream
	// lacks the tool and the check accepts its "not found" tool error).
	Vacuous []string `json:"vacuous"`
	// Racy scenarios pass or fail by timing inside the suite's own client:
	// the TypeScript SDK drops a progress notification that arrives in the
	// same read as the response, so under load tools-call-with-progress can
	// fail against the upstream directly. They may be missing from a run.
	Racy []string `json:"racy"`
}

// Baseline reads test/peers/conformance-baseline.json.
func Baseline(t testing.TB) ConformanceBaseline {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Root(t), "test", "peers", "conformance-baseline.json"))
	if err != nil {
		t.Fatalf("peers: read conformance baseline: %v", err)
	}
	var bl ConformanceBaseline
	if err := json.Unmarshal(b, &bl); err != nil {
		t.Fatalf("peers: parse conformance baseline: %v", err)
	}
	return bl
}

var resultDirRE = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$`)

// Conformance runs `conformance server --url URL` from the pinned suite and
// returns each scenario's outcome by name. With no scenarios it runs the
// suite's active set (which leaves out pending ones such as
// json-schema-2020-12); otherwise exactly the named scenarios.
func Conformance(t testing.TB, url string, scenarios ...string) map[string]ConformanceScenario {
	t.Helper()
	bin := filepath.Join(Dir(t), "node_modules/@modelcontextprotocol/conformance/dist/index.js")
	runs := [][]string{nil}
	if len(scenarios) > 0 {
		runs = runs[:0]
		for _, s := range scenarios {
			runs = append(runs, []string{"--scenario", s})
		}
	}
	res := runConformance(t, bin, url, runs)
	for _, s := range scenarios {
		if _, ok := res[s]; !ok {
			t.Fatalf("peers: conformance produced no result for scenario %s", s)
		}
	}
	return res
}

// Revision2026 is the MCP revision whose requirements Conformance2026 runs.
const Revision2026 = "2026-07-28"

// Conformance2026 runs the pinned 0.2 suite's server scenarios that MCP
// 2026-07-28 requires (`conformance server --url URL --requirements
// 2026-07-28`, the set frozen at that revision's release, extensions and
// pending scenarios included but not scored) and returns each scenario's
// outcome by name.
func Conformance2026(t testing.TB, url string) map[string]ConformanceScenario {
	t.Helper()
	bin := filepath.Join(Dir(t), "node_modules/conformance-2026/dist/index.js")
	return runConformance(t, bin, url, [][]string{{"--requirements", Revision2026}})
}

// runConformance runs the suite at bin once per extra argument list and
// reads every scenario's checks from the results it writes.
func runConformance(t testing.TB, bin, url string, runs [][]string) map[string]ConformanceScenario {
	t.Helper()
	out := t.TempDir()
	for _, extra := range runs {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		args := append([]string{bin, "server", "--url", url, "-o", out}, extra...)
		cmd := exec.CommandContext(ctx, Node(t), args...)
		cmd.Dir = Dir(t)
		leakcheck.OwnGroup(cmd)
		// The suite exits non-zero when a scenario fails; the verdicts are
		// read from the checks it writes, so only a run without them is fatal.
		combined, _ := cmd.CombinedOutput()
		leakcheck.EndGroup(cmd, groupGrace)
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut {
			t.Fatalf("peers: conformance %v did not finish\n%s", extra, combined)
		}
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatalf("peers: read conformance results: %v", err)
	}
	res := make(map[string]ConformanceScenario)
	for _, e := range entries {
		m := resultDirRE.FindStringSubmatch(e.Name())
		if !e.IsDir() || m == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(out, e.Name(), "checks.json"))
		if err != nil {
			t.Fatalf("peers: conformance scenario %s: %v", m[1], err)
		}
		var checks []ConformanceCheck
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Fatalf("peers: conformance scenario %s: parse checks: %v", m[1], err)
		}
		// A scenario with two result directories keeps the later
		// one's checks (the names sort by time).
		res[m[1]] = ConformanceScenario{Name: m[1], Checks: checks}
	}
	if len(res) == 0 {
		t.Fatalf("peers: conformance produced no results against %s", url)
	}
	return res
}

// PassingScenarios lists the names of the scenarios that are OK, sorted.
func PassingScenarios(res map[string]ConformanceScenario) []string {
	var names []string
	for name, s := range res {
		if s.OK() {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// String summarises a scenario for failure messages.
func (s ConformanceScenario) String() string {
	b, _ := json.Marshal(s.Checks)
	return fmt.Sprintf("%s: %d passed, %d failed: %s", s.Name, s.Passed(), s.Failed(), b)
}

// clientResultDirRE matches a client scenario's result directory under
// the output directory (auth scenarios sit one level deeper, in auth/).
var clientResultDirRE = regexp.MustCompile(`^(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$`)

// ConformanceClient2026 runs the pinned 0.2 suite's client scenarios that
// MCP 2026-07-28 requires (`conformance client --command COMMAND
// --requirements 2026-07-28`): the suite starts each scenario's server and
// runs COMMAND with its URL as the last argument, with env added to the
// environment. It returns every scenario's checks by name ("auth/…" for
// the authorization ones).
func ConformanceClient2026(t testing.TB, command string, env []string) map[string]ConformanceScenario {
	t.Helper()
	bin := filepath.Join(Dir(t), "node_modules/conformance-2026/dist/index.js")
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, Node(t), bin, "client", "--command", command, "--requirements", Revision2026, "-o", out)
	cmd.Dir = Dir(t)
	cmd.Env = append(os.Environ(), env...)
	leakcheck.OwnGroup(cmd)
	// Non-zero when a scenario fails: the verdicts are read from the
	// checks it writes.
	combined, _ := cmd.CombinedOutput()
	leakcheck.EndGroup(cmd, groupGrace)
	if ctx.Err() != nil {
		t.Fatalf("peers: conformance client did not finish\n%s", combined)
	}
	res := make(map[string]ConformanceScenario)
	for _, sub := range []string{"", "auth"} {
		entries, err := os.ReadDir(filepath.Join(out, sub))
		if sub != "" && os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatalf("peers: read conformance client results: %v\n%s", err, combined)
		}
		for _, e := range entries {
			m := clientResultDirRE.FindStringSubmatch(e.Name())
			if !e.IsDir() || m == nil {
				continue
			}
			name := m[1]
			if sub != "" {
				name = sub + "/" + name
			}
			b, err := os.ReadFile(filepath.Join(out, sub, e.Name(), "checks.json"))
			if err != nil {
				t.Fatalf("peers: conformance client scenario %s: %v", name, err)
			}
			var checks []ConformanceCheck
			if err := json.Unmarshal(b, &checks); err != nil {
				t.Fatalf("peers: conformance client scenario %s: parse checks: %v", name, err)
			}
			res[name] = ConformanceScenario{Name: name, Checks: checks}
		}
	}
	if len(res) == 0 {
		t.Fatalf("peers: conformance client produced no results\n%s", combined)
	}
	return res
}
