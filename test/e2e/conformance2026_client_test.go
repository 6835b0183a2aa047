//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/planlock/planlock/internal/testkit/peers"
)

// TestConformance2026Client runs the client scenarios MCP 2026-07-28
// requires with planlock as the client (test/peers/conformance-client.mjs:
// planlock proxy in front of each scenario's server, driven by the
// TypeScript SDK v2 client): exactly the committed baseline passes, and it
// holds request-metadata, http-standard-headers and the multi-round
// client scenario (sep-2322-client-request-state).
func TestConformance2026Client(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(peers.Root(t), "test", "peers", "conformance-2026-client-baseline.json"))
	if err != nil {
		t.Fatal(err)
	}
	var bl struct {
		Revision string               `json:"revision"`
		Planlock peers.ConformanceSet `json:"planlock"`
	}
	if err := json.Unmarshal(b, &bl); err != nil {
		t.Fatal(err)
	}
	if bl.Revision != peers.Revision2026 {
		t.Fatalf("baseline for %q, the suite runs %q", bl.Revision, peers.Revision2026)
	}
	for _, must := range []string{"request-metadata", "http-standard-headers", "sep-2322-client-request-state"} {
		if !slices.Contains(bl.Planlock.Passing, must) {
			t.Fatalf("the baseline lacks %s", must)
		}
	}
	driver := filepath.Join(peers.Dir(t), "conformance-client.mjs")
	res := peers.ConformanceClient2026(t, peers.Node(t)+" "+driver, []string{"PLANLOCK_BIN=" + planlockBin})
	got := peers.PassingScenarios(res)
	if !slices.Equal(got, bl.Planlock.Passing) {
		for _, name := range bl.Planlock.Passing {
			if s, ok := res[name]; !ok || !s.OK() {
				t.Logf("fails with planlock as the client: %s", s)
			}
		}
		t.Fatalf("with planlock as the client the passing scenarios are\n  %v\nthe baseline says\n  %v\n(update test/peers/conformance-2026-client-baseline.json if the suite or planlock changed)", got, bl.Planlock.Passing)
	}
}
